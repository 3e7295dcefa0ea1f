// Winograd F(2x2, 3x3) for float32 3x3 convolutions with stride 1 and no
// dilation: each 2x2 output tile costs 16 multiplies per (input, output)
// channel pair instead of 36, at the price of transforms into and out of
// the 4x4 Winograd domain. oneDNN 2.6 has Winograd for AVX-512 only; its
// direct jit:avx2 kernels reach ~75 % of the AVX2 FMA peak on MNIST's and
// the ResNet's 3x3 convolutions, which are most of those steps.
//
// The forward, the input gradient (a stride-1 convolution of grad_output
// with the flipped, transposed weight) and the weight gradient (the
// backward of the forward's algorithm: per 4x4 Winograd point, a product
// of the transformed inputs and the transformed grad_output summed over
// every tile) run here. Each is a candidate beside oneDNN's direct kernel,
// kept only where it measures faster (kernel_choice.h, candidate name
// "winograd").
//
// Layouts: the activations channel-blocked (nChw8c or nChw16c, as
// plan_layouts gives a convolution's activations, one block for all ports),
// the weight OIHW, the bias plain.
#pragma once
#include <memory>

#include "ops/conv_transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

// Whether every direction of this convolution can run here with the
// activations in `layout`.
bool winograd_suits(const ConvGeom& g, Layout layout);

// Whether it is worth timing against oneDNN: at least as many 2x2 output
// tiles as channels on either side. Each run transforms the weight and
// reads the transformed weight (16 x C x O floats) once per block of
// tiles, so with fewer tiles than that (a deep layer of a small image:
// torchvision's resnet18 at 64x64 has 64 tiles for 128 channels) it loses
// by 1.5-10x, and timing it would only slow the compile.
bool winograd_worth_timing(const ConvGeom& g);

// Forward ports: in = (x, weight, bias?), out = (y). relu: y is
// relu(convolution), NaN kept as aten.relu keeps it.
std::unique_ptr<Kernel> make_winograd_fwd(const ConvGeom& g, Layout layout, bool bias, bool relu,
                                          int threads);

// Input gradient with the convolution backward's ports: in = (grad_output,
// x, weight), out = (grad_input, grad_weight, grad_bias); it writes
// grad_input only. relu_mask: grad_input is 0 where x <= 0
// (trainstep.conv_backward_relu); grad_input may be x's buffer.
std::unique_ptr<Kernel> make_winograd_bwd_data(const ConvGeom& g, Layout layout, bool relu_mask,
                                               int threads);

// Weight gradient with the same ports; it writes grad_weight, and
// grad_bias when want_bias (each only where its output is wanted).
std::unique_ptr<Kernel> make_winograd_bwd_weight(const ConvGeom& g, Layout layout, bool want_bias,
                                                 int threads);

}  // namespace ts

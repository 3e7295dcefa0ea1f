// The weight (and bias) gradient of a float32 2-D convolution whose input
// has one channel (one group): an image network's first layer (MNIST's, and
// the zoo's ResNet and MobileNet). oneDNN 2.6's jit:avx2 kernel computes it
// at ~8 GFLOP/s on one core, a tenth of its AVX-512 kernel
// (bench/conv_impls.cpp), and that is 3-5 % of those models' AVX2 step.
// This kernel is a candidate beside oneDNN's, kept only where it measures
// faster (kernel_choice.h, candidate name "one_channel").
//
// Layouts: grad_output channel-blocked (nChw8c or nChw16c, as plan_layouts
// gives a convolution's activations), the input plain (one channel is never
// blocked), grad_weight OIHW and grad_bias plain.
#pragma once
#include <memory>

#include "ops/conv_transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

// Whether the kernel computes this convolution's weight gradient.
bool one_channel_wgrad_suits(const ConvGeom& g, Layout grad_output);

// Runs with the convolution backward's ports: in = (grad_output, input,
// weight), out = (grad_input, grad_weight, grad_bias). It writes
// grad_weight, and grad_bias when want_bias; grad_input is not its part.
std::unique_ptr<Kernel> make_one_channel_wgrad(const ConvGeom& g, Layout grad_output,
                                               bool want_bias, int threads);

}  // namespace ts

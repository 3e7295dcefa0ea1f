// Winograd F(2x2, 3x3) for the backward of bfloat16 3x3 convolutions with
// stride 1 and no dilation, on AVX512_BF16 (vdpbf16ps). Zen 4's bfloat16
// dot product does twice the multiply-adds of a float32 FMA, and oneDNN
// 2.6's direct bf16 convolutions already run near that rate, while the
// float32 twin runs Winograd's 2.25x fewer multiplies (conv_winograd.h):
// without this, autocast gained only ~1.2x on the convolution examples.
//
// Numerics: the transforms run in float32 from the bf16 values; the
// transformed operands are rounded to bfloat16 once (vcvtneps2bf16:
// nearest-even, denormals to zero) for the products, which accumulate in
// float32, and the result is rounded once as torch rounds its output. That
// second rounding, in the Winograd domain where the output transform sums
// nine products, puts the error at up to ~2 % of the output's rms against
// ~0.2 % for a direct product (tests/cpp/test_conv_winograd_bf16.cpp).
// Non-finite inputs give non-finite outputs, but which, and NaN or inf, can
// differ from eager's, as for the float32 Winograd (a tile's transforms mix
// its 16 inputs).
//
// Why the backward only: gradients flow linearly into the update, so the
// extra error stays a small fraction of eager autocast's own spread
// (verify of the MNIST CNN: 0.01 of the tolerance on the conv weights).
// The forward's output passes relu and max-pool decisions first: a bf16
// Winograd forward made MNIST's fc1.bias update 2x verify's tolerance
// (20x eager's bf16 spread), so the forward stays oneDNN's.
//
// The input gradient (a stride-1 convolution of grad_output with the
// flipped, transposed weight) and the weight gradient, as the float32
// Winograd computes them, with every activation port channels-last (nhwc,
// as plan_layouts stores bf16 convolution activations), the weight OIHW,
// all bfloat16. Each is a candidate beside oneDNN's kernel, kept only where
// it measures faster (kernel_choice.h, candidate name "winograd").
#pragma once
#include <memory>

#include "ops/conv_transpose.h"
#include "ops/op.h"

namespace ts {

// Whether this CPU can run these kernels now: AVX512_BF16, and cpu_isa()
// at avx512 (TRAINSTEP_ISA=avx2 turns them off).
bool winograd_bf16_available();

// Whether every direction of this convolution can run here (channels
// multiples of 16, padding at most 2).
bool winograd_bf16_suits(const ConvGeom& g);

// Ports as make_winograd_bwd_data / _bwd_weight (conv_winograd.h): in =
// (grad_output, x, weight), out = (grad_input, grad_weight, grad_bias).
std::unique_ptr<Kernel> make_winograd_bf16_bwd_data(const ConvGeom& g, bool relu_mask,
                                                    int threads);
std::unique_ptr<Kernel> make_winograd_bf16_bwd_weight(const ConvGeom& g, bool want_bias,
                                                      int threads);

}  // namespace ts

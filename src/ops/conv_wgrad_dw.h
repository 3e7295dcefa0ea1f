// The weight (and bias) gradient of a float32 depthwise 2-D convolution
// (groups = input channels = output channels): MobileNet's, EfficientNet's
// and ConvNeXt's. Where its activations are plain (a channel count that is
// not a multiple of the block, or a squeeze-excite product beside it),
// oneDNN 2.6 has no depthwise kernel for this gradient and runs its gemm
// one: im2col and a tiny product per channel, ~1-2 ms per layer where the
// arithmetic is tens of microseconds. This kernel is a candidate beside
// oneDNN's, kept only where it measures faster (kernel_choice.h, candidate
// name "depthwise").
//
// It takes the input and grad_output plain or channel-blocked (each its
// own), copies each (sample, channel block) of both into a zero-padded
// blocked tile, and sums the taps there with one vector lane per channel.
// Parallel over channel blocks, samples added in order: the result does
// not depend on the thread count.
#pragma once
#include <memory>

#include "ops/conv_transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

// Whether the kernel computes this convolution's weight gradient.
bool depthwise_wgrad_suits(const ConvGeom& g);

// Runs with the convolution backward's ports: in = (grad_output, input,
// weight), out = (grad_input, grad_weight, grad_bias). It writes
// grad_weight, and grad_bias when want_bias; grad_input is not its part.
std::unique_ptr<Kernel> make_depthwise_wgrad(const ConvGeom& g, Layout input, Layout grad_output,
                                             bool want_bias, int threads);

}  // namespace ts

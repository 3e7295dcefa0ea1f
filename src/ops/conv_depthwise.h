// Float32 depthwise 2-D convolutions (groups = input channels = output
// channels: MobileNet's, EfficientNet's and ConvNeXt's) of our own: the
// forward and the weight (and bias) gradient. Where the activations are
// plain (a channel count that is not a multiple of the block, or a
// squeeze-excite product beside them), or the kernel is large against the
// image (ConvNeXt's 7x7 on 2x2), oneDNN 2.6 has no depthwise kernel for
// them and runs its gemm one: im2col and a tiny product per channel, ~1-5
// ms per layer where the arithmetic is tens of microseconds. These are
// candidates beside oneDNN's, kept only where they measure faster
// (kernel_choice.h, candidate name "depthwise").
//
// Both take their activations plain or channel-blocked (each its own),
// copy each (sample, channel block) into a zero-padded blocked tile, and
// work there with one vector lane per channel. Parallel over channel
// blocks (the weight gradient adds samples in order): the results do not
// depend on the thread count.
#pragma once
#include <memory>

#include "ops/conv_transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

// Whether this is a depthwise convolution (channel multiplier 1).
bool depthwise_suits(const ConvGeom& g);

// The forward with the convolution's ports: in = (input, weight, bias?),
// out = (output); `bias`: input 2 is present.
std::unique_ptr<Kernel> make_depthwise_fwd(const ConvGeom& g, Layout input, Layout output, bool bias,
                                           int threads);

// Runs with the convolution backward's ports: in = (grad_output, input,
// weight), out = (grad_input, grad_weight, grad_bias). It writes
// grad_weight, and grad_bias when want_bias; grad_input is not its part.
std::unique_ptr<Kernel> make_depthwise_wgrad(const ConvGeom& g, Layout input, Layout grad_output,
                                             bool want_bias, int threads);

}  // namespace ts

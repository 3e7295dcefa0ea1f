// Batch norm's bfloat16 kernels for channels-last (nhwc) activations, the
// layout plan_layouts gives the bfloat16 values between oneDNN convolutions
// (batch_norm.cpp picks them).
#pragma once
#include <cstdint>
#include <memory>

#include "ops/op.h"

namespace ts {

// A kernel for aten.native_batch_norm (backward = false; inputs x, weight?,
// bias?, running_mean?, running_var?; outputs y, save_mean, save_invstd) or
// its backward (inputs grad_out, x, weight?, running_mean?, running_var?,
// save_mean?, save_invstd?; outputs grad_input, grad_weight, grad_bias) on
// bfloat16 activations stored (N, H, W, C), viewed as [N, S, C] with
// S = H * W, and float32 per-channel tensors. `train` is the forward's
// `training` or the backward's `train` attribute.
std::unique_ptr<Kernel> make_bn_nhwc_bf16(int64_t N, int64_t C, int64_t S, bool backward,
                                          bool train, double eps);

}  // namespace ts

// Batch norm's bfloat16 kernels for channels-last (nhwc) activations, the
// layout plan_layouts gives the bfloat16 values between oneDNN convolutions
// (batch_norm.cpp picks them).
#pragma once
#include <cstdint>
#include <memory>

#include "ops/op.h"
#include "trainstep/bfloat16.h"

namespace ts {

// A kernel for aten.native_batch_norm (backward = false; inputs x, weight?,
// bias?, running_mean?, running_var?; outputs y, save_mean, save_invstd) or
// its backward (inputs grad_out, x, weight?, running_mean?, running_var?,
// save_mean?, save_invstd?; outputs grad_input, grad_weight, grad_bias) on
// bfloat16 activations stored (N, H, W, C), viewed as [N, S, C] with
// S = H * W, and float32 per-channel tensors. `train` is the forward's
// `training` or the backward's `train` attribute; `relu` (forward only)
// applies relu_bf16 to y (trainstep.batch_norm_relu).
std::unique_ptr<Kernel> make_bn_nhwc_bf16(int64_t N, int64_t C, int64_t S, bool backward,
                                          bool train, double eps, bool relu);

// aten.relu on n rounded bfloat16 values in place: x < 0 ? 0 : x on each
// value, so NaN and -0.0 pass. On the rounded value, not before rounding:
// a tiny negative float rounds to -0.0, which the separate relu keeps.
inline void relu_bf16(uint16_t* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = bf16_to_float(p[i]) < 0.0f ? uint16_t(0) : p[i];
}

}  // namespace ts

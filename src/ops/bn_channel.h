// One batch-norm channel's step from its totals, shared by the blocked
// (batch_norm.cpp) and channels-last (batch_norm_nhwc.cpp) kernels, which
// sum over samples in their own order and then agree on everything else.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/op.h"
#include "trainstep/bfloat16.h"

namespace ts {

// Channel c of a per-channel tensor: float32, or bfloat16 for the saves of
// a bfloat16 batch norm with no weight, bias or running stats (torch keeps
// them in the input's dtype then; see bn_save_dtype).
inline double channel_value(const Tensor& t, int64_t c) {
  return t.dtype == DType::BF16 ? double(bf16_to_float(t.as<uint16_t>()[c])) : double(t.as<float>()[c]);
}
inline void set_channel_value(const Tensor& t, int64_t c, double v) {
  if (t.dtype == DType::BF16) t.as<uint16_t>()[c] = float_to_bf16(float(v));
  else t.as<float>()[c] = float(v);
}

// Port indices are the ops': forward (x, weight?, bias?, running_mean?,
// running_var?) -> (y, save_mean, save_invstd); backward (grad_out, x,
// weight?, running_mean?, running_var?, save_mean?, save_invstd?) ->
// (grad_input, grad_weight, grad_bias). Per-channel tensors are float32.
struct BnChannelStep {
  bool backward, train;
  double eps, M;  // M: values per channel

  // Backward's statistics, from the saves (train) or the running stats.
  double mean(const Tensor* in, int64_t c) const {
    return train ? channel_value(in[5], c) : in[3].as<float>()[c];
  }
  double invstd(const Tensor* in, int64_t c) const {
    return train ? channel_value(in[6], c) : 1.0 / std::sqrt(double(in[4].as<float>()[c]) + eps);
  }

  // Channel c's totals t1, t2 (forward: sums of d and d^2, d = x - shift m;
  // backward: sums of dy and (x - mean) * dy, m = mean): writes the saves
  // (forward, training) or grad_weight / grad_bias (backward), and the
  // pass-2 coefficients, in float as torch's opmath: y = x * a + b, or
  // dx = (dy - b - (x - m) * k) * a.
  void operator()(const Tensor* in, Tensor* out, int64_t c, double t1, double t2, double m,
                  float& a, float& b, float& k) const {
    const Tensor& wt = in[backward ? 2 : 1];
    const float* w = wt.data ? wt.as<float>() : nullptr;
    if (!backward) {
      double mu, is;
      if (train) {
        const double var = std::max((t2 - t1 * t1 / M) / M, 0.0);
        mu = m + t1 / M;
        is = 1.0 / std::sqrt(var + eps);
        if (out[1].data) set_channel_value(out[1], c, mu);
        if (out[2].data) set_channel_value(out[2], c, is);
      } else {
        mu = in[3].as<float>()[c];
        is = 1.0 / std::sqrt(double(in[4].as<float>()[c]) + eps);
      }
      const float* bias = in[2].data ? in[2].as<float>() : nullptr;
      a = float(is * (w ? w[c] : 1.0f));
      b = float((bias ? bias[c] : 0.0f) - mu * a);
      k = 0.0f;
    } else {
      const double is = invstd(in, c);
      if (out[1].data) out[1].as<float>()[c] = float(t2 * is);
      if (out[2].data) out[2].as<float>()[c] = float(t1);
      a = float(is * (w ? w[c] : 1.0f));
      k = train ? float(t2 * is * is / M) : 0.0f;
      b = train ? float(t1 / M) : 0.0f;  // the mean of dy
    }
  }
};

}  // namespace ts

// Batch norm's float32 / float64 arithmetic, shared by the unfused kernels
// (batch_norm.cpp) and the fused forms that run a pointwise group on each
// tile of the activations (batch_norm_group.cpp): both call these loops, so
// a fused step gives the unfused step's bits.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace ts {

struct BnGeom {
  int64_t N = 0, C = 0, S = 1;
  int64_t M() const { return N * S; }  // elements per channel
};

// The forward's and backward's type rules (batch_norm.cpp), for the fused
// forms to check their batch-norm part with.
std::vector<TensorType> batch_norm_infer(const NodeCtx& ctx);
std::vector<TensorType> batch_norm_backward_infer(const NodeCtx& ctx);

// Per-channel sums in double over the channel's N blocks of S values. The
// simd reductions let the compiler keep several partial sums per vector
// lane (a fixed order for a given build, so results repeat run to run).
// Statistics: sum of d and d^2 for d = x - shift.
template <class T>
void stat_sums(const BnGeom& g, const T* x, int64_t c, double shift, double& s1, double& s2) {
  double a = 0, b = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const T* p = x + (n * g.C + c) * g.S;
#pragma omp simd reduction(+ : a, b)
    for (int64_t s = 0; s < g.S; ++s) {
      const double d = double(p[s]) - shift;
      a += d;
      b += d * d;
    }
  }
  s1 = a;
  s2 = b;
}

// Backward, one (sample, channel) plane of S values: adds dy and
// (x - mean) * dy to sum_dy and dot.
template <class T>
inline void plane_grad_sums(const T* dy, const T* x, int64_t S, double mean, double& sum_dy,
                            double& dot) {
  double a = sum_dy, b = dot;
#pragma omp simd reduction(+ : a, b)
  for (int64_t s = 0; s < S; ++s) {
    const double d = dy[s];
    a += d;
    b += (double(x[s]) - mean) * d;
  }
  sum_dy = a;
  dot = b;
}

// y = x * alpha + beta, as PyTorch's CPU kernel applies it.
template <class T>
inline void bn_apply(const T* x, T alpha, T beta, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * alpha + beta;
}

// Training: dx = (dy - mean(dy) - (x - mean) * k) * invstd * w, the
// projection of dy off the batch statistics (PyTorch's formula); eval:
// gmean = k = 0.
template <class T>
inline void bn_grad_apply(const T* dy, const T* x, T gmean, T mean, T k, T scale, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = (dy[i] - gmean - (x[i] - mean) * k) * scale;
}

// The channel-blocked forms: `rows` rows of B lanes, lane l holding
// channel l of the block. The coefficients are copied to locals first: y
// might alias a pointer argument, and the compiler would reload them.
template <int B>
inline void bn_apply_rows(const float* a_in, const float* b_in, const float* x, float* y, int64_t rows) {
  float a[B], b[B];
  for (int l = 0; l < B; ++l) a[l] = a_in[l], b[l] = b_in[l];
  for (int64_t s = 0; s < rows; ++s)
    for (int l = 0; l < B; ++l) y[s * B + l] = x[s * B + l] * a[l] + b[l];
}

template <int B>
inline void bn_grad_apply_rows(const float* dy, const float* x, const float* gmean_in,
                               const float* mean_in, const float* k_in, const float* scale_in,
                               float* dx, int64_t rows) {
  float gmean[B], mean[B], k[B], scale[B];
  for (int l = 0; l < B; ++l)
    gmean[l] = gmean_in[l], mean[l] = mean_in[l], k[l] = k_in[l], scale[l] = scale_in[l];
  for (int64_t s = 0; s < rows; ++s)
    for (int l = 0; l < B; ++l)
      dx[s * B + l] = (dy[s * B + l] - gmean[l] - (x[s * B + l] - mean[l]) * k[l]) * scale[l];
}

}  // namespace ts

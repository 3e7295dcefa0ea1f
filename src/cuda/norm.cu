// Device code of batch norm and layer norm (norm.cpp plans them). The
// arithmetic follows the CPU kernels (src/ops/batch_norm.cpp, norm.cpp) step
// by step: statistics in double, the per-element affine maps in T with the
// same roundings, so results agree to float rounding.
#include "cuda/launch.h"
#include "cuda/rows.h"

namespace ts::cuda {

namespace {

using namespace rowk;

constexpr int kThreads = 256;

// ---- batch norm ---------------------------------------------------------------

// Per-channel shift of the statistics' sums: forward, the channel's first
// element (as the CPU kernel, so that sums stay accurate when |mean| >> std);
// backward, the mean the gradient formula uses.
template <class T>
__device__ double bn_shift(const BatchNormParams& p, int64_t c) {
  if (!p.backward) return double(static_cast<const T*>(p.x)[c * p.S]);
  const T* m = static_cast<const T*>(p.training ? p.save_mean : p.run_mean);
  return double(m[c]);
}

// Pass 1: block (c, q) sums chunk q of channel c's N*S elements: d and d*d
// (forward, d = x - shift) or dy and d*dy (backward).
template <class T>
__global__ void bn_partial(BatchNormParams p) {
  __shared__ double sh[32];
  const T* x = static_cast<const T*>(p.x);
  const T* dy = static_cast<const T*>(p.dy);
  const int64_t M = p.N * p.S;
  for (int64_t blk = blockIdx.x; blk < p.C * p.P; blk += gridDim.x) {
    const int64_t c = blk / p.P, q = blk % p.P;
    const double shift = bn_shift<T>(p, c);
    const int64_t m1 = min(M, (q + 1) * p.chunk);
    double a = 0, b = 0;
    int64_t m = q * p.chunk + threadIdx.x;
    if (m < m1) {
      // (n, s) of element m, advanced by blockDim.x elements per step.
      int64_t n = m / p.S, s = m % p.S;
      const int64_t dn = blockDim.x / p.S, ds = blockDim.x % p.S;
      for (; m < m1; m += blockDim.x) {
        const int64_t i = (n * p.C + c) * p.S + s;
        const double d = double(x[i]) - shift;
        if (p.backward) {
          const double g = double(dy[i]);
          a += g;
          b += d * g;
        } else {
          a += d;
          b += d * d;
        }
        n += dn;
        s += ds;
        if (s >= p.S) {
          s -= p.S;
          ++n;
        }
      }
    }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
      p.part[(c * p.P + q) * 2] = a;
      p.part[(c * p.P + q) * 2 + 1] = b;
    }
  }
}

// Pass 2, one thread per channel: the partial sums in order, the saved
// statistics or weight/bias gradients, and the coefficients of pass 3.
template <class T>
__global__ void bn_finalize(BatchNormParams p) {
  T* coef = static_cast<T*>(p.coef);
  const double M = double(p.N * p.S);
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < p.C;
       c += int64_t(gridDim.x) * blockDim.x) {
    double t1 = 0, t2 = 0;
    if (p.backward || p.training)
      for (int64_t q = 0; q < p.P; ++q) {
        t1 += p.part[(c * p.P + q) * 2];
        t2 += p.part[(c * p.P + q) * 2 + 1];
      }
    const double w = p.w ? double(static_cast<const T*>(p.w)[c]) : 1.0;
    double mean, invstd;
    if (p.training && !p.backward) {
      const double var = fmax((t2 - t1 * t1 / M) / M, 0.0);
      mean = bn_shift<T>(p, c) + t1 / M;
      invstd = 1.0 / sqrt(var + p.eps);
      if (p.out1) static_cast<T*>(p.out1)[c] = T(mean);
      if (p.out2) static_cast<T*>(p.out2)[c] = T(invstd);
    } else if (p.training) {
      mean = double(static_cast<const T*>(p.save_mean)[c]);
      invstd = double(static_cast<const T*>(p.save_invstd)[c]);
    } else {
      mean = double(static_cast<const T*>(p.run_mean)[c]);
      invstd = 1.0 / sqrt(double(static_cast<const T*>(p.run_var)[c]) + p.eps);
    }
    if (!p.backward) {
      // y = x * alpha + beta
      const T alpha = T(invstd * w);
      const double b = p.b ? double(static_cast<const T*>(p.b)[c]) : 0.0;
      coef[c] = alpha;
      coef[p.C + c] = T(b - mean * double(alpha));
    } else {
      // dx = (dy - gmean - (x - mean) * k) * scale
      if (p.out1) static_cast<T*>(p.out1)[c] = T(t2 * invstd);
      if (p.out2) static_cast<T*>(p.out2)[c] = T(t1);
      coef[c] = T(invstd * w);
      coef[p.C + c] = T(mean);
      coef[2 * p.C + c] = p.training ? T(t2 * invstd * invstd / M) : T(0);
      coef[3 * p.C + c] = p.training ? T(t1 / M) : T(0);
    }
  }
}

// Pass 3: the per-channel affine map, elementwise.
template <class T>
__global__ void bn_apply(BatchNormParams p) {
  const T* x = static_cast<const T*>(p.x);
  const T* dy = static_cast<const T*>(p.dy);
  const T* coef = static_cast<const T*>(p.coef);
  T* y = static_cast<T*>(p.out0);
  const int64_t total = p.N * p.C * p.S;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / p.S) % p.C;
    if (!p.backward) {
      y[i] = x[i] * coef[c] + coef[p.C + c];
    } else {
      const T scale = coef[c], mean = coef[p.C + c], k = coef[2 * p.C + c],
              gmean = coef[3 * p.C + c];
      y[i] = (dy[i] - gmean - (x[i] - mean) * k) * scale;
    }
  }
}

template <class T>
void bn_run(const BatchNormParams& p, cudaStream_t s) {
  if (p.backward || p.training)
    bn_partial<T><<<grid_for(p.C * p.P), kThreads, 0, s>>>(p);
  bn_finalize<T><<<blocks_for(p.C, kThreads), kThreads, 0, s>>>(p);
  if (p.out0 && p.N * p.C * p.S > 0)
    bn_apply<T><<<blocks_for(p.N * p.C * p.S, kThreads), kThreads, 0, s>>>(p);
}

// ---- layer norm ---------------------------------------------------------------

// One block per row: mean, then the variance about it (two passes, as the
// CPU kernel), then y = ((x - mean) * rstd) * w + b in T.
template <class T>
__global__ void ln_forward(LayerNormParams p) {
  __shared__ double sh[32];
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  const T* b = static_cast<const T*>(p.b);
  T* y = static_cast<T*>(p.out0);
  const int64_t N = p.N;
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {
    const T* xr = x + r * N;
    double s = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += double(xr[i]);
    const double mu = block_sum(s, sh) / double(N);
    double ss = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const double d = double(xr[i]) - mu;
      ss += d * d;
    }
    const double rs = 1.0 / sqrt(block_sum(ss, sh) / double(N) + p.eps);
    const T m = T(mu), q = T(rs);
    if (threadIdx.x == 0) {
      if (p.out1) static_cast<T*>(p.out1)[r] = m;
      if (p.out2) static_cast<T*>(p.out2)[r] = q;
    }
    if (!y) continue;
    T* yr = y + r * N;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      T v = (xr[i] - m) * q;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

// dx, one block per row: with g = dy * w, dx = rstd * (g - mean(g) -
// xhat * mean(g * xhat)), in double.
template <class T>
__global__ void ln_backward_dx(LayerNormParams p) {
  __shared__ double sh[32];
  const T* dy = static_cast<const T*>(p.dy);
  const T* x = static_cast<const T*>(p.x);
  const T* mean = static_cast<const T*>(p.mean_in);
  const T* rstd = static_cast<const T*>(p.rstd_in);
  const T* w = static_cast<const T*>(p.w);
  T* dx = static_cast<T*>(p.out0);
  const int64_t N = p.N;
  for (int64_t r = blockIdx.x; r < p.M; r += gridDim.x) {
    const T* dyr = dy + r * N;
    const T* xr = x + r * N;
    const double mu = double(mean[r]), rs = double(rstd[r]);
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const double g = w ? double(dyr[i]) * double(w[i]) : double(dyr[i]);
      sg += g;
      sgx += g * (double(xr[i]) - mu) * rs;
    }
    const double a = block_sum(sg, sh) / double(N);
    const double c = block_sum(sgx, sh) / double(N);
    T* dxr = dx + r * N;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const double g = w ? double(dyr[i]) * double(w[i]) : double(dyr[i]);
      dxr[i] = T(rs * (g - a - (double(xr[i]) - mu) * rs * c));
    }
  }
}

// dw/db, pass 1: thread (q, col) sums column col over row group q.
template <class T>
__global__ void ln_backward_cols(LayerNormParams p) {
  const T* dy = static_cast<const T*>(p.dy);
  const T* x = static_cast<const T*>(p.x);
  const T* mean = static_cast<const T*>(p.mean_in);
  const T* rstd = static_cast<const T*>(p.rstd_in);
  const int64_t N = p.N;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < p.P * N;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = t % N, q = t / N;
    const int64_t r0 = q * p.rows_per_part, r1 = min(p.M, r0 + p.rows_per_part);
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const double d = double(dy[r * N + col]);
      sw += d * ((double(x[r * N + col]) - double(mean[r])) * double(rstd[r]));
      sb += d;
    }
    p.part[q * N + col] = sw;
    p.part[(p.P + q) * N + col] = sb;
  }
}

// dw/db, pass 2: one thread per column adds the groups in order.
template <class T>
__global__ void ln_backward_cols_final(LayerNormParams p) {
  T* dw = static_cast<T*>(p.out1);
  T* db = static_cast<T*>(p.out2);
  const int64_t N = p.N;
  for (int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; col < N;
       col += int64_t(gridDim.x) * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t q = 0; q < p.P; ++q) {
      sw += p.part[q * N + col];
      sb += p.part[(p.P + q) * N + col];
    }
    if (dw) dw[col] = T(sw);
    if (db) db[col] = T(sb);
  }
}

template <class T>
void ln_run(const LayerNormParams& p, cudaStream_t s) {
  if (p.M > 0 && (p.out0 || p.out1 || p.out2))
    ln_forward<T><<<grid_for(p.M), p.threads, 0, s>>>(p);
}

template <class T>
void ln_backward_run(const LayerNormParams& p, cudaStream_t s) {
  if (p.out0 && p.M > 0) ln_backward_dx<T><<<grid_for(p.M), p.threads, 0, s>>>(p);
  if ((p.out1 || p.out2) && p.N > 0) {
    ln_backward_cols<T><<<blocks_for(p.P * p.N, kThreads), kThreads, 0, s>>>(p);
    ln_backward_cols_final<T><<<blocks_for(p.N, kThreads), kThreads, 0, s>>>(p);
  }
}

}  // namespace

void launch_batch_norm(const BatchNormParams& p, cudaStream_t s) {
  if (p.C <= 0) return;
  if (p.f64) bn_run<double>(p, s);
  else bn_run<float>(p, s);
}

void launch_layer_norm(const LayerNormParams& p, cudaStream_t s) {
  if (p.f64) ln_run<double>(p, s);
  else ln_run<float>(p, s);
}

void launch_layer_norm_backward(const LayerNormParams& p, cudaStream_t s) {
  if (p.f64) ln_backward_run<double>(p, s);
  else ln_backward_run<float>(p, s);
}

}  // namespace ts::cuda

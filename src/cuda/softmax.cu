// Device code of softmax / log_softmax and their gradients (softmax.cpp
// plans them), following src/ops/softmax.cpp: the line's max (NaN if any
// element is NaN), exp(x - max) in T summed in double, then
//   softmax:     y = exp(x - max) * T(1 / sum)
//   log_softmax: y = (x - max) - T(log(sum))
// and backward, with y the forward output and g the incoming gradient:
//   softmax:     dx = y * (g - T(sum(g * y)))
//   log_softmax: dx = g - exp(y) * T(sum(g)).
#include "cuda/launch.h"
#include "cuda/rows.h"

namespace ts::cuda {

namespace {

using namespace rowk;

__device__ inline float exp_t(float v) { return expf(v); }
__device__ inline double exp_t(double v) { return exp(v); }

template <class T>
__device__ inline T neg_inf();
template <>
__device__ inline float neg_inf<float>() {
  return -__int_as_float(0x7f800000);
}
template <>
__device__ inline double neg_inf<double>() {
  return -__longlong_as_double(0x7ff0000000000000LL);
}

// ---- contiguous lines (I == 1): one block per line ----------------------------

template <class T>
__global__ void softmax_rows(SoftmaxParams p) {
  __shared__ double shd[32];
  __shared__ T shm[32];
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.out);
  const int64_t R = p.R;
  for (int64_t row = blockIdx.x; row < p.O; row += gridDim.x) {
    const T* xr = x + row * R;
    T* yr = y + row * R;
    T m = neg_inf<T>();
    for (int64_t i = threadIdx.x; i < R; i += blockDim.x) m = nan_max(m, xr[i]);
    m = block_max(m, shm);
    double sum = 0;
    if (p.log) {
      for (int64_t i = threadIdx.x; i < R; i += blockDim.x) sum += double(exp_t(T(xr[i] - m)));
      const T ls = T(log(block_sum(sum, shd)));
      for (int64_t i = threadIdx.x; i < R; i += blockDim.x) yr[i] = (xr[i] - m) - ls;
    } else {
      // Each thread rescales the elements it wrote itself.
      for (int64_t i = threadIdx.x; i < R; i += blockDim.x) {
        const T e = exp_t(T(xr[i] - m));
        yr[i] = e;
        sum += double(e);
      }
      const T inv = T(1.0 / block_sum(sum, shd));
      for (int64_t i = threadIdx.x; i < R; i += blockDim.x) yr[i] *= inv;
    }
  }
}

template <class T>
__global__ void softmax_backward_rows(SoftmaxParams p) {
  __shared__ double shd[32];
  const T* g = static_cast<const T*>(p.x);
  const T* y = static_cast<const T*>(p.y);
  T* dx = static_cast<T*>(p.out);
  const int64_t R = p.R;
  for (int64_t row = blockIdx.x; row < p.O; row += gridDim.x) {
    const T* gr = g + row * R;
    const T* yr = y + row * R;
    T* dr = dx + row * R;
    double s = 0;
    for (int64_t i = threadIdx.x; i < R; i += blockDim.x)
      s += p.log ? double(gr[i]) : double(gr[i]) * double(yr[i]);
    const T st = T(block_sum(s, shd));
    for (int64_t i = threadIdx.x; i < R; i += blockDim.x)
      dr[i] = p.log ? gr[i] - exp_t(yr[i]) * st : yr[i] * (gr[i] - st);
  }
}

// ---- strided lines (I > 1): one thread per line -------------------------------
// Neighbouring threads take neighbouring i, so each step over r reads a
// contiguous run of I elements.

template <class T>
__global__ void softmax_cols(SoftmaxParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.out);
  const int64_t R = p.R, I = p.I;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < p.O * I;
       line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (line / I) * R * I + line % I;
    const T* xs = x + base;
    T* ys = y + base;
    T m = neg_inf<T>();
    for (int64_t r = 0; r < R; ++r) m = nan_max(m, xs[r * I]);
    double sum = 0;
    if (p.log) {
      for (int64_t r = 0; r < R; ++r) sum += double(exp_t(T(xs[r * I] - m)));
      const T ls = T(log(sum));
      for (int64_t r = 0; r < R; ++r) ys[r * I] = (xs[r * I] - m) - ls;
    } else {
      for (int64_t r = 0; r < R; ++r) {
        const T e = exp_t(T(xs[r * I] - m));
        ys[r * I] = e;
        sum += double(e);
      }
      const T inv = T(1.0 / sum);
      for (int64_t r = 0; r < R; ++r) ys[r * I] *= inv;
    }
  }
}

template <class T>
__global__ void softmax_backward_cols(SoftmaxParams p) {
  const T* g = static_cast<const T*>(p.x);
  const T* y = static_cast<const T*>(p.y);
  T* dx = static_cast<T*>(p.out);
  const int64_t R = p.R, I = p.I;
  for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < p.O * I;
       line += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (line / I) * R * I + line % I;
    double s = 0;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t k = base + r * I;
      s += p.log ? double(g[k]) : double(g[k]) * double(y[k]);
    }
    const T st = T(s);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t k = base + r * I;
      dx[k] = p.log ? g[k] - exp_t(y[k]) * st : y[k] * (g[k] - st);
    }
  }
}

template <class T>
void forward(const SoftmaxParams& p, cudaStream_t s) {
  if (p.I == 1) softmax_rows<T><<<grid_for(p.O), p.threads, 0, s>>>(p);
  else softmax_cols<T><<<blocks_for(p.O * p.I, 256), 256, 0, s>>>(p);
}

template <class T>
void backward(const SoftmaxParams& p, cudaStream_t s) {
  if (p.I == 1) softmax_backward_rows<T><<<grid_for(p.O), p.threads, 0, s>>>(p);
  else softmax_backward_cols<T><<<blocks_for(p.O * p.I, 256), 256, 0, s>>>(p);
}

}  // namespace

void launch_softmax(const SoftmaxParams& p, cudaStream_t s) {
  if (p.O * p.R * p.I == 0) return;
  if (p.f64) forward<double>(p, s);
  else forward<float>(p, s);
}

void launch_softmax_backward(const SoftmaxParams& p, cudaStream_t s) {
  if (p.O * p.R * p.I == 0) return;
  if (p.f64) backward<double>(p, s);
  else backward<float>(p, s);
}

}  // namespace ts::cuda

// Device code of the pooling kernels (pool.cpp builds their parameters).
// One thread per output cell (forward) or input cell (average backward),
// grid-stride. Each cell scans its window in the CPU kernel's order
// (src/ops/pool.cpp, src/ops/avg_pool.cpp), so values, indices and sums
// come out bit for bit the same.
#include "cuda/pool_launch.h"

namespace ts::cuda {
namespace {

template <class T>
__device__ inline T neg_inf();
template <>
__device__ inline float neg_inf<float>() {
  return __int_as_float(0xff800000);
}
template <>
__device__ inline double neg_inf<double>() {
  return __longlong_as_double(static_cast<long long>(0xfff0000000000000ULL));
}

// Adaptive window of output cell o: [floor(o*in/out), ceil((o+1)*in/out)).
// pool.cpp bounds in * (out + 1), so the products fit int64.
__device__ inline void adaptive_range(int64_t o, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = o * in / out;
  hi = ((o + 1) * in + out - 1) / out;
}

// Max-pool window of output cell o along one axis: taps lo, lo+d, ... < hi,
// lo the first tap inside the input (as pool.cpp's first_in_bounds).
__device__ inline void max_range(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d,
                                 int64_t& lo, int64_t& hi) {
  int64_t a = o * s - pad;
  hi = min(a + (k - 1) * d + 1, in);
  if (a < 0) {
    const int64_t n = -a;
    a += (n / d + (n % d != 0)) * d;
  }
  lo = a;
}

// Average-pool window of output cell o along one axis: [lo, hi) inside the
// input, and span, the window's length counting padding (count_include_pad).
__device__ inline void avg_range(const PoolParams& p, bool rows, int64_t o, int64_t& lo, int64_t& hi,
                                 int64_t& span) {
  const int64_t in = rows ? p.H : p.W;
  if (p.adaptive) {
    adaptive_range(o, in, rows ? p.OH : p.OW, lo, hi);
    span = hi - lo;
    return;
  }
  const int64_t k = rows ? p.kh : p.kw, s = rows ? p.sh : p.sw, pad = rows ? p.ph : p.pw;
  const int64_t start = o * s - pad;
  const int64_t end = min(start + k, in + pad);
  span = end - start;
  lo = max(start, int64_t(0));
  hi = min(end, in);
}

// A window's sum (or gradient) divided as the CPU kernel does.
template <class T>
__device__ inline T avg_divide(const PoolParams& p, T v, int64_t hl, int64_t hh, int64_t hspan, int64_t wl,
                               int64_t wh, int64_t wspan) {
  if (p.adaptive) return v / static_cast<T>(hh - hl) / static_cast<T>(wh - wl);
  if (p.divisor) return v / static_cast<T>(p.divisor);
  if (p.include_pad) return v / (static_cast<T>(hspan) * static_cast<T>(wspan));
  return v / (static_cast<T>(hh - hl) * static_cast<T>(wh - wl));
}

template <class T>
__global__ void max_pool_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y,
                                int64_t* __restrict__ idx) {
  const int64_t total = p.planes * p.OH * p.OW;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t ow = i % p.OW, t = i / p.OW, oh = t % p.OH, plane = t / p.OH;
    int64_t h0, h1, w0, w1, dh = 1, dw = 1;
    if (p.adaptive) {
      adaptive_range(oh, p.H, p.OH, h0, h1);
      adaptive_range(ow, p.W, p.OW, w0, w1);
    } else {
      max_range(oh, p.H, p.kh, p.sh, p.ph, p.dh, h0, h1);
      max_range(ow, p.W, p.kw, p.sw, p.pw, p.dw, w0, w1);
      dh = p.dh, dw = p.dw;
    }
    const T* xp = x + plane * p.H * p.W;
    int64_t best_i = h0 * p.W + w0;
    T best = neg_inf<T>();
    for (int64_t h = h0; h < h1; h += dh)
      for (int64_t w = w0; w < w1; w += dw) {
        const T v = xp[h * p.W + w];
        if (v > best || v != v) {  // strictly larger, or NaN
          best = v;
          best_i = h * p.W + w;
        }
      }
    if (y) y[i] = best;
    if (idx) idx[i] = best_i;
  }
}

template <class T>
__global__ void avg_pool_kernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = p.planes * p.OH * p.OW;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t ow = i % p.OW, t = i / p.OW, oh = t % p.OH, plane = t / p.OH;
    int64_t hl, hh, hs, wl, wh, ws;
    avg_range(p, true, oh, hl, hh, hs);
    avg_range(p, false, ow, wl, wh, ws);
    if (hl >= hh || wl >= wh) {  // a window wholly in the padding averages nothing
      y[i] = T(0);
      continue;
    }
    const T* xp = x + plane * p.H * p.W;
    T sum = 0;
    for (int64_t h = hl; h < hh; ++h)
      for (int64_t w = wl; w < wh; ++w) sum += xp[h * p.W + w];
    y[i] = avg_divide<T>(p, sum, hl, hh, hs, wl, wh, ws);
  }
}

// The output cells [a, b] whose windows may hold input index h along one
// axis (a superset; the caller checks membership).
__device__ inline void covering(const PoolParams& p, bool rows, int64_t h, int64_t& a, int64_t& b) {
  const int64_t in = rows ? p.H : p.W, out = rows ? p.OH : p.OW;
  if (p.adaptive) {
    a = h * out / in;
    b = ((h + 1) * out + in - 1) / in - 1;
  } else {
    const int64_t k = rows ? p.kh : p.kw, s = rows ? p.sh : p.sw, pad = rows ? p.ph : p.pw;
    const int64_t first = h + pad - k;  // cell o holds h iff o*s - pad <= h < o*s - pad + k
    a = first < 0 ? 0 : first / s + 1;
    b = (h + pad) / s;
  }
  a = max(a, int64_t(0));
  b = min(b, out - 1);
}

// Gather form of the CPU's scatter: each input cell sums the divided
// gradients of the windows holding it, in the CPU's (oh, ow) order, so the
// sum is the same.
template <class T>
__global__ void avg_pool_backward_kernel(PoolParams p, const T* __restrict__ go, T* __restrict__ gi) {
  const int64_t total = p.planes * p.H * p.W;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t w = i % p.W, t = i / p.W, h = t % p.H, plane = t / p.H;
    int64_t oh0, oh1, ow0, ow1;
    covering(p, true, h, oh0, oh1);
    covering(p, false, w, ow0, ow1);
    const T* gp = go + plane * p.OH * p.OW;
    T sum = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      int64_t hl, hh, hs;
      avg_range(p, true, oh, hl, hh, hs);
      if (h < hl || h >= hh) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        int64_t wl, wh, ws;
        avg_range(p, false, ow, wl, wh, ws);
        if (w < wl || w >= wh) continue;
        sum += avg_divide<T>(p, gp[oh * p.OW + ow], hl, hh, hs, wl, wh, ws);
      }
    }
    gi[i] = sum;
  }
}

template <class T>
__global__ void max_unpool_kernel(int64_t planes, int64_t n_in, int64_t n_out, bool atomic,
                                  const T* __restrict__ go, const int64_t* __restrict__ idx, T* gi) {
  const int64_t total = planes * n_out;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t j = idx[o];
    if (j < 0 || j >= n_in) continue;  // not an index into the plane (the CPU fails)
    T* at = gi + (o / n_out) * n_in + j;
    if (atomic)
      atomicAdd(at, go[o]);
    else
      *at = go[o];  // windows do not overlap: each input cell gets at most one
  }
}

constexpr unsigned kThreads = 256;

}  // namespace

void launch_max_pool(const PoolParams& p, const void* x, void* y, int64_t* idx, cudaStream_t s) {
  const unsigned blocks = blocks_for(p.planes * p.OH * p.OW, kThreads);
  if (p.f64)
    max_pool_kernel<double><<<blocks, kThreads, 0, s>>>(p, static_cast<const double*>(x),
                                                        static_cast<double*>(y), idx);
  else
    max_pool_kernel<float><<<blocks, kThreads, 0, s>>>(p, static_cast<const float*>(x),
                                                       static_cast<float*>(y), idx);
}

void launch_avg_pool(const PoolParams& p, const void* x, void* y, cudaStream_t s) {
  const unsigned blocks = blocks_for(p.planes * p.OH * p.OW, kThreads);
  if (p.f64)
    avg_pool_kernel<double><<<blocks, kThreads, 0, s>>>(p, static_cast<const double*>(x),
                                                        static_cast<double*>(y));
  else
    avg_pool_kernel<float><<<blocks, kThreads, 0, s>>>(p, static_cast<const float*>(x),
                                                       static_cast<float*>(y));
}

void launch_avg_pool_backward(const PoolParams& p, const void* go, void* gi, cudaStream_t s) {
  const unsigned blocks = blocks_for(p.planes * p.H * p.W, kThreads);
  if (p.f64)
    avg_pool_backward_kernel<double><<<blocks, kThreads, 0, s>>>(p, static_cast<const double*>(go),
                                                                 static_cast<double*>(gi));
  else
    avg_pool_backward_kernel<float><<<blocks, kThreads, 0, s>>>(p, static_cast<const float*>(go),
                                                                static_cast<float*>(gi));
}

void launch_max_unpool(int64_t planes, int64_t n_in, int64_t n_out, bool f64, bool atomic,
                       const void* go, const int64_t* idx, void* gi, cudaStream_t s) {
  const unsigned blocks = blocks_for(planes * n_out, kThreads);
  if (f64)
    max_unpool_kernel<double><<<blocks, kThreads, 0, s>>>(
        planes, n_in, n_out, atomic, static_cast<const double*>(go), idx, static_cast<double*>(gi));
  else
    max_unpool_kernel<float><<<blocks, kThreads, 0, s>>>(
        planes, n_in, n_out, atomic, static_cast<const float*>(go), idx, static_cast<float*>(gi));
}

}  // namespace ts::cuda

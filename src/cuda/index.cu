// Device code of the index family: gather, scatter (value / src / add),
// index_select and index_put. index.cpp plans the shapes and strides.
//
// The CPU kernels throw on an out-of-range index; a kernel cannot, so here
// gather and index_select write 0 for such an element and scatter /
// index_put skip it (no write outside the output either way).
//
// Duplicate indices: scatter.src and index_put without accumulate keep one
// of the writes (which one is unspecified, as in PyTorch's CUDA kernels; the
// CPU keeps the last). The accumulating forms use atomics, so float sums
// come out in an unspecified order (equal to the CPU's to rounding).
#include <cstdint>

#include "cuda/gather.h"

namespace ts::cuda {

namespace {

constexpr unsigned kThreads = 256;

__device__ inline void atomic_add(float* a, float v) { atomicAdd(a, v); }
__device__ inline void atomic_add(double* a, double v) { atomicAdd(a, v); }
__device__ inline void atomic_add(int32_t* a, int32_t v) {
  atomicAdd(reinterpret_cast<int*>(a), static_cast<int>(v));
}
// Two's-complement wraparound, as the CPU's wrap_add.
__device__ inline void atomic_add(int64_t* a, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(a), static_cast<unsigned long long>(v));
}

// Offset in self of index element e, without the dim term; *src_off gets
// its offset in src.
__device__ inline int64_t self_offset(const IndexParams& p, int64_t e, int64_t* src_off) {
  int64_t so = 0, ro = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t i = e % p.ishape[d];
    e /= p.ishape[d];
    if (d != p.dim) so += i * p.sstride[d];
    ro += i * p.rstride[d];
  }
  *src_off = ro;
  return so;
}

template <class T>
__global__ void gather_kernel(IndexParams p) {
  const T* s = static_cast<const T*>(p.self);
  T* o = static_cast<T*>(p.out);
  const int64_t ds = p.dstride;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t ro;
    const int64_t so = self_offset(p, e, &ro);
    const int64_t ix = p.index[e];
    o[e] = ix >= 0 && ix < p.D ? s[so + ix * ds] : T(0);
  }
}

// scatter.value (src == nullptr) and scatter.src: T moves raw bytes.
template <class T>
__global__ void scatter_kernel(IndexParams p) {
  T* o = static_cast<T*>(p.out);
  const T* src = static_cast<const T*>(p.src);
  const T v = static_cast<T>(p.value);
  const int64_t ds = p.dstride;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t ro;
    const int64_t so = self_offset(p, e, &ro);
    const int64_t ix = p.index[e];
    if (ix < 0 || ix >= p.D) continue;
    o[so + ix * ds] = src ? src[ro] : v;
  }
}

template <class T>
__global__ void scatter_add_kernel(IndexParams p) {
  T* o = static_cast<T*>(p.out);
  const T* src = static_cast<const T*>(p.src);
  const int64_t ds = p.dstride;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t ro;
    const int64_t so = self_offset(p, e, &ro);
    const int64_t ix = p.index[e];
    if (ix < 0 || ix >= p.D) continue;
    atomic_add(o + so + ix * ds, src[ro]);
  }
}

// out[o, k, i] = self[o, index[k], i] over out's O*K*I elements.
template <class T>
__global__ void index_select_kernel(RowsParams p) {
  const T* s = static_cast<const T*>(p.self);
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.O * p.K * p.I;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % p.I, ok = e / p.I;
    const int64_t k = ok % p.K, o = ok / p.K;
    const int64_t ix = p.index[k];
    out[e] = ix >= 0 && ix < p.D ? s[(o * p.D + ix) * p.I + i] : T(0);
  }
}

// out[index[k], i] = / += values[k, i] over the K*I value elements.
template <class T, bool Add>
__global__ void index_put_kernel(RowsParams p) {
  const T* v = static_cast<const T*>(p.values);
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.K * p.I;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % p.I, k = e / p.I;
    int64_t ix = p.index[k];
    if (ix < 0) ix += p.D;  // torch counts negative indices from the end
    if (ix < 0 || ix >= p.D) continue;
    if constexpr (Add) atomic_add(out + ix * p.I + i, v[e]);
    else out[ix * p.I + i] = v[e];
  }
}

// f(T{}) for the unsigned type of p.elem bytes (moving elements).
template <class F>
void by_size(int elem, F&& f) {
  switch (elem) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// f(T{}) for the arithmetic type an Add op names.
template <class F>
void by_add(ElemOp op, F&& f) {
  switch (op) {
    case ElemOp::AddF32: f(float{}); break;
    case ElemOp::AddF64: f(double{}); break;
    case ElemOp::AddI32: f(int32_t{}); break;
    case ElemOp::AddI64: f(int64_t{}); break;
    default: break;
  }
}

}  // namespace

void launch_gather(const IndexParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  by_size(p.elem, [&](auto t) {
    gather_kernel<decltype(t)><<<blocks_for(p.n, kThreads), kThreads, 0, stream>>>(p);
  });
}

void launch_scatter(const IndexParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  if (p.op == ElemOp::Move) {
    by_size(p.elem, [&](auto t) {
      scatter_kernel<decltype(t)><<<blocks_for(p.n, kThreads), kThreads, 0, stream>>>(p);
    });
  } else {
    by_add(p.op, [&](auto t) {
      scatter_add_kernel<decltype(t)><<<blocks_for(p.n, kThreads), kThreads, 0, stream>>>(p);
    });
  }
}

void launch_index_select(const RowsParams& p, cudaStream_t stream) {
  const int64_t n = p.O * p.K * p.I;
  if (n <= 0) return;
  by_size(p.elem, [&](auto t) {
    index_select_kernel<decltype(t)><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p);
  });
}

void launch_index_put(const RowsParams& p, cudaStream_t stream) {
  const int64_t n = p.K * p.I;
  if (n <= 0) return;
  if (p.op == ElemOp::Move) {
    by_size(p.elem, [&](auto t) {
      index_put_kernel<decltype(t), false><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p);
    });
  } else {
    by_add(p.op, [&](auto t) {
      index_put_kernel<decltype(t), true><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p);
    });
  }
}

}  // namespace ts::cuda

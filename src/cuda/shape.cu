// Device code of the shape family: one strided copy kernel (shape.cpp plans
// each op's strides at compile time).
#include <cstdint>

#include "cuda/gather.h"

namespace ts::cuda {

namespace {

// Idx: 32-bit index arithmetic when every offset fits (divisions are much
// cheaper), else 64-bit.
template <class T, class Idx>
__global__ void strided_copy_kernel(CopyParams p) {
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const Idx n = static_cast<Idx>(p.n);
  const Idx step = static_cast<Idx>(gridDim.x) * blockDim.x;
  for (Idx e = static_cast<Idx>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    Idx rem = e;
    Idx so = static_cast<Idx>(p.src.offset), dof = static_cast<Idx>(p.dst.offset);
    for (int d = p.rank - 1; d >= 0; --d) {
      const Idx sz = static_cast<Idx>(p.size[d]);
      const Idx i = rem % sz;
      rem /= sz;
      so += i * static_cast<Idx>(p.src.stride[d]);
      dof += i * static_cast<Idx>(p.dst.stride[d]);
    }
    out[dof] = in[so];
  }
}

template <class T>
void launch_typed(const CopyParams& p, bool small, cudaStream_t stream) {
  const unsigned threads = 256;
  if (small)
    strided_copy_kernel<T, int32_t><<<blocks_for(p.n, threads), threads, 0, stream>>>(p);
  else
    strided_copy_kernel<T, int64_t><<<blocks_for(p.n, threads), threads, 0, stream>>>(p);
}

}  // namespace

void launch_strided_copy(const CopyParams& p, cudaStream_t stream) {
  if (p.n <= 0 || !p.in || !p.out) return;
  const bool contiguous =
      p.rank == 0 || (p.rank == 1 && p.src.stride[0] == 1 && p.dst.stride[0] == 1);
  if (contiguous) {
    const char* s = static_cast<const char*>(p.in) + p.src.offset * p.elem;
    char* d = static_cast<char*>(p.out) + p.dst.offset * p.elem;
    if (s != d)  // clone may run in place (same_index): nothing to move then
      cudaMemcpyAsync(d, s, static_cast<size_t>(p.n) * p.elem, cudaMemcpyDeviceToDevice, stream);
    return;
  }
  // Largest element offset touched on either side (strides are >= 0).
  int64_t smax = p.src.offset, dmax = p.dst.offset;
  for (int d = 0; d < p.rank; ++d) {
    smax += (p.size[d] - 1) * p.src.stride[d];
    dmax += (p.size[d] - 1) * p.dst.stride[d];
  }
  const int64_t lim = int64_t(1) << 30;  // leaves room for e + step without overflow
  const bool small = p.n < lim && smax < lim && dmax < lim;
  switch (p.elem) {
    case 1: launch_typed<uint8_t>(p, small, stream); break;
    case 2: launch_typed<uint16_t>(p, small, stream); break;
    case 4: launch_typed<uint32_t>(p, small, stream); break;
    default: launch_typed<uint64_t>(p, small, stream); break;
  }
}

}  // namespace ts::cuda

// Plain structs shared by the host side (.cpp) and the device code (.cu) of
// the CUDA kernels, so .cu files need none of the IR's headers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ts::cuda {

constexpr int kMaxRank = 8;

// Threads per block and blocks for n independent elements (grid-stride
// loops cover the rest).
inline unsigned blocks_for(int64_t n, unsigned threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535LL * 32) b = 65535LL * 32;
  return static_cast<unsigned>(b);
}

// A strided view of a contiguous tensor's elements, in an output's index
// space: element (i_0..i_{r-1}) of the output reads offset + sum i_d *
// stride[d] of the input (stride 0: broadcast).
struct Strided {
  int64_t stride[kMaxRank] = {};
  int64_t offset = 0;
};

}  // namespace ts::cuda

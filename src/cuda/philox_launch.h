// Plain parameters of the Philox random kernels (random.cu), filled by
// random.cpp.
#pragma once
#include "cuda/launch.h"

namespace ts::cuda {

// seed and offset are 0-d int64 tensors in device memory, read by the
// kernel (the step's graph is replayed with new values in them).
struct PhiloxParams {
  const int64_t* seed = nullptr;
  const int64_t* offset = nullptr;
  uint32_t key = 0;  // the node's attr key
  float* out = nullptr;
  int64_t n = 0;     // elements of out
  bool normal = false;  // philox_normal, else philox_uniform
};

void launch_philox(const PhiloxParams& p, cudaStream_t s);

}  // namespace ts::cuda

// NaN/inf counting for the session's NonFinite check, on the device, so
// the new state need not come back to the host each step.
#include "cuda/nonfinite.h"

namespace ts::cuda {

namespace {

template <class T>
__global__ void count_nonfinite(const T* x, int64_t n, int* flag) {
  int bad = 0;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    bad |= !isfinite(x[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicAdd(flag, 1);
}

}  // namespace

void launch_count_nonfinite(const FiniteCheck& t, int* flag, cudaStream_t s) {
  if (t.numel == 0) return;
  const unsigned blocks = blocks_for(t.numel) > 1024 ? 1024 : blocks_for(t.numel);
  if (t.f64)
    count_nonfinite<<<blocks, 256, 0, s>>>(static_cast<const double*>(t.data), t.numel, flag);
  else
    count_nonfinite<<<blocks, 256, 0, s>>>(static_cast<const float*>(t.data), t.numel, flag);
}

}  // namespace ts::cuda

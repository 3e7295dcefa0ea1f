// Plain parameters of the pooling kernels (pool.cu), filled by pool.cpp.
// Every op works on planes of H x W (all leading dims folded), row-major.
#pragma once
#include "cuda/launch.h"

namespace ts::cuda {

// The windows of one pooling node. Fixed windows: output row o covers rows
// o*sh - ph + i*dh (i < kh) clipped to the input (the same for columns).
// Adaptive windows: row o covers [floor(o*H/OH), ceil((o+1)*H/OH)).
struct PoolParams {
  int64_t planes = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool adaptive = false;
  bool include_pad = true;  // avg_pool2d: count_include_pad
  int64_t divisor = 0;      // avg_pool2d: divisor_override, 0 none
  bool f64 = false;         // double, else float
};

// Max pooling: values y (may be null) and flat h*W+w indices idx (may be
// null); the first maximum wins, any NaN is taken (the last NaN wins).
void launch_max_pool(const PoolParams& p, const void* x, void* y, int64_t* idx, cudaStream_t s);

// Average pooling (fixed or adaptive) and its gradient: gi from go.
void launch_avg_pool(const PoolParams& p, const void* x, void* y, cudaStream_t s);
void launch_avg_pool_backward(const PoolParams& p, const void* go, void* gi, cudaStream_t s);

// Max pooling's gradient: go[o] added at gi[plane, idx[o]] (indices outside
// the plane are skipped); gi must be zeroed first. atomic: windows may
// overlap (else each input cell gets at most one value: a plain store).
void launch_max_unpool(int64_t planes, int64_t n_in, int64_t n_out, bool f64, bool atomic,
                       const void* go, const int64_t* idx, void* gi, cudaStream_t s);

}  // namespace ts::cuda

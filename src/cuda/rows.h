// Plain parameter structs and launch functions of the row-wise CUDA kernels:
// batch and layer norm (norm.cu), reductions (reduce.cu) and softmax
// (softmax.cu). The host files (norm.cpp, reduce.cpp, softmax.cpp) plan the
// geometry at compile time and fill in the pointers at run time.
//
// Floating-point sums accumulate in double, as the CPU kernels do, so the
// results differ from theirs only by the order of double additions.
#pragma once
#include "cuda/launch.h"

namespace ts::cuda {

// Element types the kernels see (bool travels as U8: 0 or 1 bytes).
enum class Elem : int { F32, F64, I64, I32, U8 };

// ---- batch norm (norm.cu) ---------------------------------------------------
// A (N, C, S) tensor; per-channel statistics over the N*S elements of each
// channel, in P partial blocks per channel of `chunk` elements, then one
// finalize pass per channel, then an elementwise pass.
struct BatchNormParams {
  int64_t N = 0, C = 0, S = 1;
  int64_t P = 1, chunk = 0;
  bool f64 = false;
  bool backward = false;
  bool training = false;  // forward: attr training; backward: attr train
  double eps = 0;
  // Forward: x, w?, b?, running_mean/running_var (eval) -> y?, save_mean?,
  // save_invstd? (training only). Backward: dy, x, w?, the saves (train) or
  // running stats (eval) -> dx?, dw?, db?.
  const void* x = nullptr;
  const void* dy = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  const void* run_mean = nullptr;
  const void* run_var = nullptr;
  const void* save_mean = nullptr;
  const void* save_invstd = nullptr;
  void* out0 = nullptr;
  void* out1 = nullptr;
  void* out2 = nullptr;
  double* part = nullptr;  // workspace: [C][P][2] partial sums
  void* coef = nullptr;    // workspace: [4][C] per-channel coefficients (T)
};
void launch_batch_norm(const BatchNormParams& p, cudaStream_t s);

// ---- layer norm (norm.cu) ---------------------------------------------------
// M rows of N elements. Backward's weight/bias gradients sum each column
// over P groups of `rows_per_part` rows, then add the groups in order.
struct LayerNormParams {
  int64_t M = 0, N = 0;
  int threads = 128;  // per row (a multiple of 32)
  bool f64 = false;
  double eps = 0;
  // Forward: x, w?, b? -> y?, mean?, rstd?.
  // Backward: dy, x, mean, rstd, w? -> dx?, dw?, db?.
  const void* x = nullptr;
  const void* dy = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  const void* mean_in = nullptr;
  const void* rstd_in = nullptr;
  void* out0 = nullptr;
  void* out1 = nullptr;
  void* out2 = nullptr;
  int64_t P = 1, rows_per_part = 0;
  double* part = nullptr;  // workspace: [2][P][N]
};
void launch_layer_norm(const LayerNormParams& p, cudaStream_t s);
void launch_layer_norm_backward(const LayerNormParams& p, cudaStream_t s);

// ---- reductions (reduce.cu) -------------------------------------------------
enum class RedOp : int { Sum, Mean, Max, Min };

// The input viewed as [O, R, I] (R reduced; split into P chunks of `chunk`
// when the outputs alone give too little parallelism) or, when the reduced
// dims do not merge into one group, the general form: nk kept dims and nr
// reduced dims of the merged input, with their strides.
struct ReduceParams {
  RedOp op = RedOp::Sum;
  Elem in = Elem::F32;  // input element type
  Elem ct = Elem::F32;  // compute and output type
  int64_t O = 1, R = 1, I = 1;
  int64_t P = 1, chunk = 0;
  int threads = 256;  // rows form (I == 1): threads per block
  double count = 1;   // mean's divisor
  bool general = false;
  int nk = 0, nr = 0;
  int64_t kshape[kMaxRank] = {}, kstride[kMaxRank] = {};
  int64_t rshape[kMaxRank] = {}, rstride[kMaxRank] = {};
  int64_t out_numel = 1;
  const void* x = nullptr;
  void* out = nullptr;
  void* part = nullptr;  // workspace: [O][P][I] accumulators (8 bytes each), when P > 1
};
void launch_reduce(const ReduceParams& p, cudaStream_t s);

// argmax along one dim of [O, R, I] (R >= 1) -> int64 [O, I].
struct ArgmaxParams {
  Elem in = Elem::F32;
  int64_t O = 1, R = 1, I = 1;
  const void* x = nullptr;
  int64_t* out = nullptr;
};
void launch_argmax(const ArgmaxParams& p, cudaStream_t s);

// ---- softmax (softmax.cu) ---------------------------------------------------
// Lines of R elements with stride I in [O, R, I]. I == 1: one block of
// `threads` per line; otherwise one thread per line.
struct SoftmaxParams {
  int64_t O = 1, R = 1, I = 1;
  int threads = 128;
  bool f64 = false;
  bool log = false;
  const void* x = nullptr;  // forward: input; backward: grad_output
  const void* y = nullptr;  // backward: the forward's output
  void* out = nullptr;
};
void launch_softmax(const SoftmaxParams& p, cudaStream_t s);
void launch_softmax_backward(const SoftmaxParams& p, cudaStream_t s);

// Helpers of these kernels only, in their own namespace so that inline
// functions of other kernel families with the same names cannot clash.
namespace rowk {

// Threads per block for a row of n elements: the smallest power of 2 >= 32
// covering it, at most `cap`.
inline int row_threads(int64_t n, int cap = 256) {
  int t = 32;
  while (t < cap && t < n) t *= 2;
  return t;
}

}  // namespace rowk
}  // namespace ts::cuda

#ifdef __CUDACC__
// ---- device helpers shared by the .cu files ---------------------------------
namespace ts::cuda::rowk {

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024),
// returned to every thread; sh holds 32 doubles. Deterministic for a given
// block size. Every thread of the block must call it.
__device__ inline double block_sum(double v, double* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // sh may still be read from a previous call
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    v = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}

// NaN-propagating max: NaN once any operand is NaN.
template <class T>
__device__ inline T nan_max(T a, T b) {
  return (b > a || b != b) ? b : a;
}

// Max of v over the block with NaN propagation; as block_sum (sh: 32 T).
template <class T>
__device__ inline T block_max(T v, T* sh) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    v = lane < nw ? sh[lane] : sh[0];
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}

// Blocks for a grid-stride loop over n block-sized work items.
inline unsigned grid_for(int64_t n, int64_t cap = int64_t(1) << 20) {
  if (n < 1) n = 1;
  return static_cast<unsigned>(n < cap ? n : cap);
}

}  // namespace ts::cuda::rowk
#endif

// A float64 matrix product for the CPU, written here because oneDNN 2.6 has
// no f64 matmul there. Cache-blocked in the usual way: C is cut into MC x NC
// blocks; for each KC slice of K, the block's A rows and B columns are packed
// into contiguous MR-row / NR-column slivers, and a register-tiled MR x NR
// micro-kernel (plain loops the compiler vectorises) runs over them.
//
// Threads take tasks (static round robin): one column block and a run of row
// blocks, each thread with its own packing buffers, so no thread waits on
// another. Every C element is summed in the
// same order (k ascending, cut at the same KC boundaries) however the blocks
// are cut and whichever thread runs them: results do not depend on the
// thread count.
//
// All memory (the packing buffers) is allocated at construction; run() does
// not allocate.
#pragma once
#include <cstdint>

#include "trainstep/tensor.h"

namespace ts {

class Gemm64 {
 public:
  // C[z] (m, n) = alpha * op(A[z]) @ op(B[z]) + beta * C[z], z < batch, all
  // row-major and contiguous. op(A) is (m, k): A is stored (m, k), or (k, m)
  // when trans_a. op(B) is (k, n): B is stored (k, n), or (n, k) when
  // trans_b. `threads`: the most threads run() uses (1: serial).
  Gemm64(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
         int threads);

  // beta == 0: C is written without being read (NaN or garbage in C does
  // not propagate), as torch's addmm does with beta = 0.
  void run(const double* a, const double* b, double* c, double alpha = 1.0,
           double beta = 0.0);

  static constexpr int MR = 6;   // micro-tile rows
  static constexpr int NR = 16;  // micro-tile columns
  static constexpr int64_t KC = 256;  // K slice (fixed: it fixes the summation order)

 private:
  void block(int64_t z, int64_t ib0, int64_t ib1, int64_t jb, const double* a, const double* b,
             double* c, double alpha, double beta, double* apack, double* bpack) const;
  void pack_a(const double* a, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
              double* dst) const;
  void pack_b(const double* b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
              double* dst) const;

  int64_t batch_, m_, n_, k_;
  bool ta_, tb_;
  int threads_;
  int64_t mc_ = 0, nc_ = 0;  // block sizes (multiples of MR / NR)
  int64_t mblocks_ = 0, nblocks_ = 0;
  int64_t mgroups_ = 1;  // runs of row blocks per column block (tasks)
  bool parallel_ = false;
  size_t apack_size_ = 0, bpack_size_ = 0;  // doubles per thread
  Buffer pack_;                              // threads_ * (apack + bpack)
};

}  // namespace ts

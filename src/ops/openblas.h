// OpenBLAS's sgemm, one of the GEMM candidates chosen by measurement
// (kernel_choice.h, name "openblas"). It is loaded at run time
// (libopenblas.so.0, which Debian's libopenblas0-* packages and most
// distributions provide; `make deps` installs the OpenMP build), so neither
// the library nor an exported package links it: without it, or with a
// pthreads build (its own thread pool), the candidate is simply not offered. It is offered to one-thread steps only: threaded,
// OpenBLAS allocates on every call, and the step path allocates nothing.
//
// OpenBLAS picks its kernels by CPU when it loads. Under TRAINSTEP_ISA=avx2
// (or scalar) apply_cpu_isa_env() sets OPENBLAS_CORETYPE=Haswell (Nehalem)
// unless it is set already, as an AVX2-only (older) CPU would have it.
#pragma once
#include <cstdint>

namespace ts {

// One (m, n, k) product on cblas_sgemm, row-major: C = alpha * op(A) @
// op(B) + beta * C, A stored (m, k) or (k, m) when trans_a, B (k, n) or
// (n, k) when trans_b; the same interface as SmallGemm (gemm_small.h).
class OpenBlasGemm {
 public:
  // Whether the library is there (see above) and takes these sizes: every
  // one positive (it rejects a leading dimension of 0, and prints) and
  // within its int.
  static bool suits(int64_t m, int64_t n, int64_t k);
  OpenBlasGemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);
  void run(const float* a, const float* b, float* c, float alpha, float beta) const;

 private:
  int m_, n_, k_, trans_a_, trans_b_, lda_, ldb_;
};

}  // namespace ts

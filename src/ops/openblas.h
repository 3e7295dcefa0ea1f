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

namespace ts {

// cblas_sgemm, row-major: C = alpha * op(A) @ op(B) + beta * C, with
// op(X) = X^T where the flag is set; lda/ldb/ldc are row strides as stored.
struct OpenBlasGemm {
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c,
                int ldc) = nullptr;
  void run(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
           float beta, float* c) const;
};

// The library's sgemm, or null when libopenblas.so.0 cannot be loaded.
const OpenBlasGemm* openblas();

}  // namespace ts

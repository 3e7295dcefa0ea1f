#include "ops/openblas.h"

#include <dlfcn.h>

namespace ts {

namespace {

// cblas.h's enum values (CBLAS_ORDER, CBLAS_TRANSPOSE).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc);

// The library's cblas_sgemm, or null.
Sgemm sgemm() {
  static const Sgemm fn = []() -> Sgemm {
    // Loaded once and kept for the process (never dlclose'd: its threads
    // and buffers live as long as it does).
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    // Only a sequential (0) or OpenMP (2) build: they run on the caller's
    // OpenMP thread count. A pthreads build (1) keeps a pool of its own,
    // sized by the machine, that a one-thread step could not hold to.
    using Parallel = int (*)();
    auto parallel = reinterpret_cast<Parallel>(dlsym(h, "openblas_get_parallel"));
    if (!parallel || (parallel() != 0 && parallel() != 2)) return nullptr;
    return reinterpret_cast<Sgemm>(dlsym(h, "cblas_sgemm"));
  }();
  return fn;
}

}  // namespace

bool OpenBlasGemm::suits(int64_t m, int64_t n, int64_t k) {
  const int64_t most = 1 << 30;
  return sgemm() && m > 0 && n > 0 && k > 0 && m < most && n < most && k < most &&
         m * k < most && k * n < most && m * n < most;
}

OpenBlasGemm::OpenBlasGemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b)
    : m_(int(m)), n_(int(n)), k_(int(k)), trans_a_(trans_a ? kTrans : kNoTrans),
      trans_b_(trans_b ? kTrans : kNoTrans), lda_(int(trans_a ? m : k)),
      ldb_(int(trans_b ? k : n)) {}

void OpenBlasGemm::run(const float* a, const float* b, float* c, float alpha, float beta) const {
  sgemm()(kRowMajor, trans_a_, trans_b_, m_, n_, k_, alpha, a, lda_, b, ldb_, beta, c, n_);
}

}  // namespace ts

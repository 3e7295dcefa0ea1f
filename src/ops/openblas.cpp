#include "ops/openblas.h"

#include <dlfcn.h>

namespace ts {

namespace {
// cblas.h's enum values (CBLAS_ORDER, CBLAS_TRANSPOSE).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
}  // namespace

void OpenBlasGemm::run(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                       const float* b, float beta, float* c) const {
  // Stored shapes: A (m, k), or (k, m) when ta; B (k, n), or (n, k) when tb.
  sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k, alpha, a, ta ? m : k,
        b, tb ? k : n, beta, c, n);
}

const OpenBlasGemm* openblas() {
  static const OpenBlasGemm* lib = []() -> const OpenBlasGemm* {
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
    static OpenBlasGemm g;
    g.sgemm = reinterpret_cast<decltype(g.sgemm)>(dlsym(h, "cblas_sgemm"));
    return g.sgemm ? &g : nullptr;
  }();
  return lib;
}

}  // namespace ts

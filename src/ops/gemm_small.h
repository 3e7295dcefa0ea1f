// A hand-written float32 GEMM for products whose inner dimension is small:
// C = alpha * op(A) @ op(B) + beta * C with K <= kMaxK. The unrolled LSTM's
// per-time-step weight gradients (K = the batch) are the case: oneDNN's AVX2
// gemm packs and blocks for large K and reaches about half the FMA peak
// there. The matmul op offers this as a candidate and keeps it only where it
// measures faster (ops/kernel_choice.h).
//
// Both operands are packed per call into register-tile panels (zero padded),
// so any transposition reads the same way; the buffers are allocated when
// the kernel is built. Each C element is one FMA chain over k in order, at
// every ISA level, so all levels give the same bits (in a build whose base
// level has FMA, as the default x86-64-v3 does).
#pragma once
#include <cstdint>
#include <vector>

namespace ts {

class SmallGemm {
 public:
  static constexpr int64_t kMaxK = 256;
  // (M,K) @ (K,N); ta / tb: that operand is stored transposed, (K,M) or (N,K).
  SmallGemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int threads);
  // A small K, or a small M with K <= kMaxK, and at most kMaxWork FMAs: a
  // larger product is oneDNN's (its blocking wins there, and timing both
  // candidates at compile time would cost more than it can save).
  static constexpr int64_t kMaxWork = int64_t(1) << 26;
  static bool suits(int64_t m, int64_t n, int64_t k) {
    return m > 0 && n > 0 && k > 0 && k <= kMaxK && (k <= 64 || m <= 64) && m * n * k <= kMaxWork;
  }
  // beta == 0 writes C without reading it.
  void run(const float* a, const float* b, float* c, float alpha, float beta);

  int64_t m() const { return m_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }

 private:
  int64_t m_, n_, k_;
  bool ta_, tb_;
  int threads_;
  std::vector<float> pa_, pb_;  // packed panels, sized for every level's tile
};

}  // namespace ts

#include "ops/gemm_small.h"

#include <algorithm>
#include <cstring>

#include "ops/isa_target.h"
#include "ops/parallel.h"

namespace ts {

namespace {

int64_t round_up(int64_t x, int64_t r) { return (x + r - 1) / r * r; }

// Register tiles: MR rows by 2 vectors. AVX2 has 16 vector registers (12
// accumulators), AVX-512 32 (16).
constexpr int kMrAvx2 = 6, kMrAvx512 = 8;
constexpr int64_t kRowsOuterBytes = 256 << 10;

// What one call computes, for the per-level panel functions.
struct Job {
  const float* pa;  // MR-row panels of op(A): [panel][k][MR]
  const float* pb;  // NR-column panels of op(B): [panel][k][NR]
  float* c;
  int64_t m, n, k;
  float alpha, beta;
  bool rows_outer;
};

void pack_a(const float* a, int64_t M, int64_t K, bool ta, int mr, int64_t p, float* pa) {
  float* dst = pa + p * K * mr;
  const int64_t m0 = p * mr;
  const int rows = static_cast<int>(std::min<int64_t>(mr, M - m0));
  for (int64_t k = 0; k < K; ++k) {
    float* d = dst + k * mr;
    for (int i = 0; i < rows; ++i) d[i] = ta ? a[k * M + m0 + i] : a[(m0 + i) * K + k];
    for (int i = rows; i < mr; ++i) d[i] = 0.f;
  }
}

void pack_b(const float* b, int64_t N, int64_t K, bool tb, int nr, int64_t q, float* pb) {
  float* dst = pb + q * K * nr;
  const int64_t n0 = q * nr;
  const int cols = static_cast<int>(std::min<int64_t>(nr, N - n0));
  for (int64_t k = 0; k < K; ++k) {
    float* d = dst + k * nr;
    if (!tb) {
      std::memcpy(d, b + k * N + n0, sizeof(float) * cols);
    } else {
      for (int j = 0; j < cols; ++j) d[j] = b[(n0 + j) * K + k];
    }
    for (int j = cols; j < nr; ++j) d[j] = 0.f;
  }
}

// One MR x 2W tile of C. A partial tile goes through a local copy of C, so
// every element is computed by the same vector expression.
template <int W, int MR>
TS_INLINE void tile(const float* pa, const float* pb, int64_t K, float* c, int64_t ldc, int rows,
                    int cols, float alpha, float beta) {
  using V = typename VecOf<W>::type;
  constexpr int NR = 2 * W;
  V acc[MR][2];
  // ak[i] * ones is a plain broadcast (x * 1.f folds away). V{} + ak[i]
  // would keep a scalar add of 0.f in the loop: it is not a no-op for -0.f.
  const V ones = V{} + 1.f;
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = V{};
  for (int64_t k = 0; k < K; ++k) {
    V b0, b1;
    std::memcpy(&b0, pb + k * NR, sizeof(V));
    std::memcpy(&b1, pb + k * NR + W, sizeof(V));
    const float* ak = pa + k * MR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V av = ak[i] * ones;
      acc[i][0] += av * b0;
      acc[i][1] += av * b1;
    }
  }
  const bool full = rows == MR && cols == NR;
  float local[MR * NR];
  float* dst = c;
  int64_t ld = ldc;
  if (!full) {
    dst = local;
    ld = NR;
    if (beta != 0.f)
      for (int i = 0; i < rows; ++i) std::memcpy(local + i * NR, c + i * ldc, sizeof(float) * cols);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (!full && i >= rows) break;
    for (int h = 0; h < 2; ++h) {
      V out = alpha * acc[i][h];
      if (beta != 0.f) {
        V old;
        std::memcpy(&old, dst + i * ld + h * W, sizeof(V));
        V scaled = beta * old;
        // Both products rounded before the add: without the barriers the
        // compiler fuses one of them into an FMA, and which one differs
        // between the levels' copies (then their bits would differ).
        asm("" : "+m"(out), "+m"(scaled));
        out += scaled;
      }
      std::memcpy(dst + i * ld + h * W, &out, sizeof(V));
    }
  }
  if (!full)
    for (int i = 0; i < rows; ++i) std::memcpy(c + i * ldc, local + i * NR, sizeof(float) * cols);
}

// Panel i of C: row panel i against every column panel when rows_outer
// (C is written row after row; all of packed B stays in cache), else
// column panel i against every row panel (B's panel stays in L1).
template <int W, int MR>
TS_INLINE void panel(const Job& j, int64_t i) {
  constexpr int NR = 2 * W;
  const int64_t mp = (j.m + MR - 1) / MR, np = (j.n + NR - 1) / NR;
  const int64_t p0 = j.rows_outer ? i : 0, p1 = j.rows_outer ? i + 1 : mp;
  const int64_t q0 = j.rows_outer ? 0 : i, q1 = j.rows_outer ? np : i + 1;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t m0 = p * MR, n0 = q * NR;
      const int rows = static_cast<int>(std::min<int64_t>(MR, j.m - m0));
      const int cols = static_cast<int>(std::min<int64_t>(NR, j.n - n0));
      tile<W, MR>(j.pa + p * j.k * MR, j.pb + q * j.k * NR, j.k, j.c + m0 * j.n + n0, j.n, rows,
                  cols, j.alpha, j.beta);
    }
}

// The level's copies are functions, not lambdas (isa_target.h says why).
void panel_base(const Job& j, int64_t i) { panel<8, kMrAvx2>(j, i); }
#if TS_X86
#if !defined(__AVX2__)
TS_AVX2 void panel_avx2(const Job& j, int64_t i) { panel<8, kMrAvx2>(j, i); }
#endif
TS_AVX512 void panel_avx512(const Job& j, int64_t i) { panel<16, kMrAvx512>(j, i); }
#endif

}  // namespace

SmallGemm::SmallGemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int threads)
    : m_(m), n_(n), k_(k), ta_(ta), tb_(tb), threads_(threads) {
  pa_.resize(std::max(round_up(m, kMrAvx2), round_up(m, kMrAvx512)) * k);
  pb_.resize(round_up(n, 32) * k);
}

void SmallGemm::run(const float* a, const float* b, float* c, float alpha, float beta) {
  void (*col)(const Job&, int64_t) = panel_base;
  int mr = kMrAvx2, nr = 16;
#if TS_X86
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::Avx512) {
    col = panel_avx512;
    mr = kMrAvx512;
    nr = 32;
  }
#if !defined(__AVX2__)
  if (isa == CpuIsa::Avx2) col = panel_avx2;
#endif
#endif
  const int64_t mp = (m_ + mr - 1) / mr, np = (n_ + nr - 1) / nr;
  const bool par = threads_ > 1;
  float* pa = pa_.data();
  float* pb = pb_.data();
  parallel_for(mp + np, par, [&](int64_t i) {
    if (i < mp)
      pack_a(a, m_, k_, ta_, mr, i, pa);
    else
      pack_b(b, n_, k_, tb_, nr, i - mp, pb);
  });
  // Row panels outer when packed B fits in L2 with room to spare.
  const bool rows_outer = sizeof(float) * k_ * np * nr <= kRowsOuterBytes;
  const Job job{pa, pb, c, m_, n_, k_, alpha, beta, rows_outer};
  parallel_for(rows_outer ? mp : np, par, [&](int64_t i) { col(job, i); });
}

}  // namespace ts

// One core's float32 FMA peak: 12 independent AVX-512 (or AVX2) FMA chains
// held in registers, so nothing but the FMA units limits the loop. The
// performance figures in docs/performance.md compare the step's GFLOP/s with this.
//   g++ -O2 -march=native bench/fma_peak.cpp -o /tmp/fma_peak && /tmp/fma_peak
#include <immintrin.h>

#include <chrono>
#include <cstdio>

#if defined(__AVX512F__)
using V = __m512;
constexpr int kLanes = 16;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#else
using V = __m256;
constexpr int kLanes = 8;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#endif

#define DECL(i) V a##i = SET1(1.0f + i * 1e-7f);
#define STEP(i) a##i = FMA(a##i, b, c);
#define SUM(i) t = ADD(t, a##i);
#define ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)

int main() {
  ALL(DECL)
  const V b = SET1(0.9999999f), c = SET1(1e-7f);
  const long iters = 100000000;
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iters; ++k) {
    ALL(STEP)
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  V t = SET1(0.f);
  ALL(SUM)
  float out[kLanes];
  STORE(out, t);  // keeps the chains live
  std::printf("fp32 FMA peak, one thread: %.1f GFLOP/s (checksum %g)\n",
              iters * 12.0 * kLanes * 2 / s / 1e9, out[0]);
}

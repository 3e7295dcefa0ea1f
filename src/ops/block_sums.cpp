#include "ops/block_sums.h"

#include "ops/isa_target.h"

namespace ts {

namespace {

template <int B>
void sums_base(const float* x, const float* dy, const double* sh, int64_t S, double* s1,
               double* s2, bool acc) {
  if (!acc)
    for (int l = 0; l < B; ++l) s1[l] = s2[l] = 0;
  for (int64_t s = 0; s < S; ++s)
    for (int l = 0; l < B; ++l) {
      const double d = double(x[s * B + l]) - sh[l];
      const double g = dy ? double(dy[s * B + l]) : d;
      s1[l] += g;
      s2[l] += d * g;
    }
}

#if TS_X86
// Four lanes per register, B / 4 registers per sum.
template <int B>
TS_AVX2 void sums_avx2(const float* x, const float* dy, const double* sh, int64_t S, double* s1,
                       double* s2, bool acc) {
  constexpr int V = B / 4;
  __m256d a[V], q[V], h[V];
  for (int v = 0; v < V; ++v) {
    a[v] = acc ? _mm256_loadu_pd(s1 + 4 * v) : _mm256_setzero_pd();
    q[v] = acc ? _mm256_loadu_pd(s2 + 4 * v) : _mm256_setzero_pd();
    h[v] = _mm256_loadu_pd(sh + 4 * v);
  }
  for (int64_t s = 0; s < S; ++s) {
    const float* xr = x + s * B;
    for (int v = 0; v < V; ++v) {
      const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(xr + 4 * v)), h[v]);
      const __m256d g = dy ? _mm256_cvtps_pd(_mm_loadu_ps(dy + s * B + 4 * v)) : d;
      a[v] = _mm256_add_pd(a[v], g);
      q[v] = _mm256_fmadd_pd(d, g, q[v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    _mm256_storeu_pd(s1 + 4 * v, a[v]);
    _mm256_storeu_pd(s2 + 4 * v, q[v]);
  }
}

// GCC 12 warns that _mm512_cvtps_pd's undefined pass-through is
// uninitialised; the zero-masked form has none.
TS_AVX512 inline __m512d cvt8(__m256 v) { return _mm512_maskz_cvtps_pd(0xFF, v); }

// Eight lanes per register: a 16-lane block in two.
TS_AVX512 void sums16_avx512(const float* x, const float* dy, const double* sh, int64_t S,
                             double* s1, double* s2, bool acc) {
  const __m512d z = _mm512_setzero_pd();
  __m512d a0 = acc ? _mm512_loadu_pd(s1) : z, a1 = acc ? _mm512_loadu_pd(s1 + 8) : z;
  __m512d q0 = acc ? _mm512_loadu_pd(s2) : z, q1 = acc ? _mm512_loadu_pd(s2 + 8) : z;
  const __m512d h0 = _mm512_loadu_pd(sh), h1 = _mm512_loadu_pd(sh + 8);
  for (int64_t s = 0; s < S; ++s) {
    const float* xr = x + s * 16;
    const __m512d d0 = _mm512_sub_pd(cvt8(_mm256_loadu_ps(xr)), h0);
    const __m512d d1 = _mm512_sub_pd(cvt8(_mm256_loadu_ps(xr + 8)), h1);
    const __m512d g0 = dy ? cvt8(_mm256_loadu_ps(dy + s * 16)) : d0;
    const __m512d g1 = dy ? cvt8(_mm256_loadu_ps(dy + s * 16 + 8)) : d1;
    a0 = _mm512_add_pd(a0, g0);
    a1 = _mm512_add_pd(a1, g1);
    q0 = _mm512_fmadd_pd(d0, g0, q0);
    q1 = _mm512_fmadd_pd(d1, g1, q1);
  }
  _mm512_storeu_pd(s1, a0);
  _mm512_storeu_pd(s1 + 8, a1);
  _mm512_storeu_pd(s2, q0);
  _mm512_storeu_pd(s2 + 8, q1);
}
#endif

}  // namespace

void block_lane_sums(int B, const float* x, const float* dy, const double* shift, int64_t S,
                     double* s1, double* s2, bool accumulate) {
  const bool acc = accumulate;
#if TS_X86
  const CpuIsa isa = cpu_isa();
  if (B == 16 && isa == CpuIsa::Avx512) return sums16_avx512(x, dy, shift, S, s1, s2, acc);
  if (isa >= CpuIsa::Avx2)
    return B == 16 ? sums_avx2<16>(x, dy, shift, S, s1, s2, acc)
                   : sums_avx2<8>(x, dy, shift, S, s1, s2, acc);
#endif
  if (B == 16) return sums_base<16>(x, dy, shift, S, s1, s2, acc);
  sums_base<8>(x, dy, shift, S, s1, s2, acc);
}

}  // namespace ts

#include "ops/vmath.h"

#include <cmath>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

// libmvec's entry points, named by the x86 vector function ABI: e = AVX-512
// (16 lanes), d = AVX2 (8 lanes). Linked through libm's AS_NEEDED libmvec.
extern "C" {
#if defined(__AVX512F__)
__m512 _ZGVeN16v_expf(__m512);
__m512 _ZGVeN16v_logf(__m512);
__m512 _ZGVeN16v_erff(__m512);
__m512 _ZGVeN16v_tanhf(__m512);
#elif defined(__AVX2__)
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_logf(__m256);
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
#endif
}

namespace ts {

namespace {

#if defined(__AVX512F__)
template <__m512 (*F)(__m512)>
void apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i)));
  if (i < n) {  // masked tail: no read or write past n
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, F(_mm512_maskz_loadu_ps(k, x + i)));
  }
}
#define TS_VEC(name) apply<_ZGVeN16v_##name>
#elif defined(__AVX2__)
template <__m256 (*F)(__m256)>
void apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float buf[8] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    _mm256_storeu_ps(buf, F(_mm256_loadu_ps(buf)));
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}
#define TS_VEC(name) apply<_ZGVdN8v_##name>
#else
template <float (*F)(float)>
void apply(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F(x[i]);
}
#define TS_VEC(name) apply<::name>
#endif

}  // namespace

#if defined(__AVX512F__)
// libmvec's expf leaves its fast path (per vector, lane by lane through the
// scalar function) for inputs below about -87, where the result is denormal
// or 0. Masked attention feeds it -inf by the million, so those lanes are
// handled here: 0 at or below -104 (expf underflows to 0 there), the scalar
// expf in between, and the vector function gets 0 in their place.
static __m512 exp16(__m512 v) {
  const __mmask16 low = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m512 zero = _mm512_setzero_ps();
  __m512 r = _ZGVeN16v_expf(_mm512_mask_mov_ps(v, low, zero));
  if (!low) return r;
  r = _mm512_mask_mov_ps(r, low, zero);
  const __mmask16 mid = low & _mm512_cmp_ps_mask(v, _mm512_set1_ps(-104.0f), _CMP_GT_OQ);
  if (!mid) return r;
  alignas(64) float x[16], t[16];
  _mm512_store_ps(x, v);
  _mm512_store_ps(t, r);
  for (int l = 0; l < 16; ++l)
    if (mid >> l & 1) t[l] = std::exp(x[l]);
  return _mm512_load_ps(t);
}
void vexp(const float* x, float* y, int64_t n) { apply<exp16>(x, y, n); }
#else
void vexp(const float* x, float* y, int64_t n) { TS_VEC(expf)(x, y, n); }
#endif
void vlog(const float* x, float* y, int64_t n) { TS_VEC(logf)(x, y, n); }
void verf(const float* x, float* y, int64_t n) { TS_VEC(erff)(x, y, n); }
void vtanh(const float* x, float* y, int64_t n) { TS_VEC(tanhf)(x, y, n); }

}  // namespace ts

#include "ops/vmath.h"

#include <cmath>

#include "ops/isa_target.h"

#if TS_X86
// libmvec's entry points, named by the x86 vector function ABI: e = AVX-512
// (16 lanes), d = AVX2 (8 lanes). Linked through libm's AS_NEEDED libmvec.
extern "C" {
TS_AVX512 __m512 _ZGVeN16v_expf(__m512);
TS_AVX512 __m512 _ZGVeN16v_logf(__m512);
TS_AVX512 __m512 _ZGVeN16v_erff(__m512);
TS_AVX512 __m512 _ZGVeN16v_tanhf(__m512);
TS_AVX2 __m256 _ZGVdN8v_expf(__m256);
TS_AVX2 __m256 _ZGVdN8v_logf(__m256);
TS_AVX2 __m256 _ZGVdN8v_erff(__m256);
TS_AVX2 __m256 _ZGVdN8v_tanhf(__m256);
}
#endif

namespace ts {

namespace {

template <float (*F)(float)>
void apply1(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F(x[i]);
}

float exp1(float v) { return std::exp(v); }
float log1(float v) { return std::log(v); }
float erf1(float v) { return std::erf(v); }
float tanh1(float v) { return std::tanh(v); }

#if TS_X86
template <__m512 (*F)(__m512)>
TS_AVX512 void apply16(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i)));
  if (i < n) {  // masked tail: no read or write past n
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, F(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

template <__m256 (*F)(__m256)>
TS_AVX2 void apply8(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through a zero-padded buffer: no read or write past n
    alignas(32) float buf[8] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    _mm256_store_ps(buf, F(_mm256_load_ps(buf)));
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}

// libmvec's expf leaves its fast path (per vector, lane by lane through the
// scalar function) for inputs below about -87, where the result is denormal
// or 0. Masked attention feeds it -inf by the million, so those lanes are
// handled here: 0 at or below -104 (expf underflows to 0 there), the scalar
// expf in between, and the vector function gets 0 in their place.
TS_AVX512 __m512 exp16(__m512 v) {
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

// The same on 8 lanes, with compare vectors for masks.
TS_AVX2 __m256 exp8(__m256 v) {
  const __m256 low = _mm256_cmp_ps(v, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m256 zero = _mm256_setzero_ps();
  __m256 r = _ZGVdN8v_expf(_mm256_blendv_ps(v, zero, low));
  const int lows = _mm256_movemask_ps(low);
  if (!lows) return r;
  r = _mm256_blendv_ps(r, zero, low);
  const int mid = lows & _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-104.0f), _CMP_GT_OQ));
  if (!mid) return r;
  alignas(32) float x[8], t[8];
  _mm256_store_ps(x, v);
  _mm256_store_ps(t, r);
  for (int l = 0; l < 8; ++l)
    if (mid >> l & 1) t[l] = std::exp(x[l]);
  return _mm256_load_ps(t);
}

// The level's vector form, else the scalar function.
#define TS_DISPATCH(v16, v8, s1)                        \
  switch (cpu_isa()) {                                  \
    case CpuIsa::Avx512: return apply16<v16>(x, y, n);  \
    case CpuIsa::Avx2: return apply8<v8>(x, y, n);      \
    case CpuIsa::Scalar: break;                         \
  }                                                     \
  apply1<s1>(x, y, n)
#else
#define TS_DISPATCH(v16, v8, s1) apply1<s1>(x, y, n)
#endif

}  // namespace

void vexp(const float* x, float* y, int64_t n) { TS_DISPATCH(exp16, exp8, exp1); }
void vlog(const float* x, float* y, int64_t n) { TS_DISPATCH(_ZGVeN16v_logf, _ZGVdN8v_logf, log1); }
void verf(const float* x, float* y, int64_t n) { TS_DISPATCH(_ZGVeN16v_erff, _ZGVdN8v_erff, erf1); }
void vtanh(const float* x, float* y, int64_t n) {
  TS_DISPATCH(_ZGVeN16v_tanhf, _ZGVdN8v_tanhf, tanh1);
}

}  // namespace ts

#include "trainstep/bfloat16.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ts {

namespace {

#if defined(__AVX2__)
// bf16_round_bits on 8 float bit patterns, as 8 int32 lanes. GCC leaves the
// scalar rule's loop unvectorised (the select and the narrowing store), so
// the baseline build (x86-64-v3: AVX2) spells it out; the bits are the
// same as the inline rule's.
inline __m256i round_bits8(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
}

inline __m256i load8(const float* p) { return _mm256_castps_si256(_mm256_loadu_ps(p)); }
#endif

}  // namespace

void floats_to_bf16(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 16 <= n; i += 16) {
    const __m256i a = round_bits8(load8(src + i)), b = round_bits8(load8(src + i + 8));
    // packus works per 128-bit lane: (a0 b0 a1 b1) -> (a0 a1 b0 b1).
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), p);
  }
#endif
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, 4);
    dst[i] = bf16_round_bits(u);
  }
}

void round_floats_to_bf16(float* p, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m256i r = _mm256_slli_epi32(round_bits8(load8(p + i)), 16);
    _mm256_storeu_ps(p + i, _mm256_castsi256_ps(r));
  }
#endif
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    u = static_cast<uint32_t>(bf16_round_bits(u)) << 16;
    std::memcpy(p + i, &u, 4);
  }
}

void bf16_to_floats(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

}  // namespace ts

// Counter-based random ops. Both are pure functions of (seed, offset, key,
// element index), so a step is reproducible and the Python exporter computes
// the same values.
//
// philox_uniform: element i uses counter (lo32(i>>2), hi32(i>>2), key, offset)
//   and key (lo32(seed), hi32(seed)); it takes word i&3 of the Philox4x32-10
//   output x, u = (x >> 8) * 2^-24 in [0, 1) (exact in float).
// philox_normal: element i uses ONE counter per element,
//   (lo32(i), hi32(i), key, offset); with words x0, x1:
//   u1 = ((x0 >> 8) + 1) * 2^-24 in (0, 1], u2 = (x1 >> 8) * 2^-24,
//   z = sqrt(-2 ln u1) * cos(2 pi u2), computed in double, rounded to float.
#include <cmath>

#include "ops/broadcast.h"
#include "ops/isa_target.h"
#include "ops/philox.h"

namespace ts {

namespace {

constexpr double kTwoPow24Inv = 1.0 / 16777216.0;

std::vector<TensorType> philox_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  for (int i = 0; i < 2; ++i) {
    ctx.expect_dtype(i, DType::I64);
    if (ctx.input(i).numel() != 1) ctx.fail("seed and offset must be 0-d int64 tensors");
  }
  ctx.attr_int("key");
  Shape s = ctx.attr_ints("shape");
  for (int64_t d : s)
    if (d < 0) ctx.fail("negative size in shape " + shape_str(s));
  return {{DType::F32, s}};
}

#if TS_X86
// Both halves of each lane's 32x32-bit product from two 32x32->64
// multiplies (even lanes, then odd lanes shifted down): cheaper than a
// separate mullo_epi32, which costs two multiplies itself. b is a broadcast
// constant, so its odd lanes need no shift. (The maskz forms with all lanes
// set: GCC 12's plain forms warn about their undefined pass-through.)
TS_AVX512 void mulhilo16(__m512i a, __m512i b, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_maskz_mul_epu32(0xFF, a, b);
  const __m512i odd = _mm512_maskz_mul_epu32(0xFF, _mm512_maskz_srli_epi64(0xFF, a, 32), b);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(0xFF, even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_maskz_slli_epi64(0xFF, odd, 32));
}

// A word's top 24 bits as a float in [0, 1).
TS_AVX512 __m512 to_unit16(__m512i v, __m512 scale) {
  return _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, v, 8)), scale);
}

// philox4x32_10 on 16 consecutive counters at once (block indices b0 ..
// b0+15, same key words, offset and key): the same arithmetic as the scalar
// function lane by lane, written as floats to o[4 * b + j] for the m of the
// 64 outputs that are wanted.
TS_AVX512 void philox_uniform16(uint64_t b0, uint32_t ka, uint32_t offset, const uint32_t key[2], float* o,
                      int64_t m) {
  const __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Lane i's 64-bit block index b0 + i: low words, and the high words with
  // the carry out of the low words.
  const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0))), idx);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, idx);
  __m512i c0 = lo;
  __m512i c1 = _mm512_mask_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0 >> 32))),
                                     carry, _mm512_set1_epi32(static_cast<int>(b0 >> 32)),
                                     _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(ka));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(offset));
  uint32_t k0 = key[0], k1 = key[1];
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m512i hi0, lo0, hi1, lo1;
    mulhilo16(c0, m0, hi0, lo0);
    mulhilo16(c2, m1, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m512 scale = _mm512_set1_ps(static_cast<float>(kTwoPow24Inv));
  const __m512 w0 = to_unit16(c0, scale), w1 = to_unit16(c1, scale), w2 = to_unit16(c2, scale),
               w3 = to_unit16(c3, scale);
  // Counter b's four words go to o[4b .. 4b+3]: a 4 x 16 transpose, by
  // 4 x 4 transposes within each 128-bit lane, then moving whole lanes
  // (maskz forms for GCC 12, as in mulhilo16).
  const __m512 t0 = _mm512_maskz_unpacklo_ps(0xFFFF, w0, w1), t1 = _mm512_maskz_unpackhi_ps(0xFFFF, w0, w1);
  const __m512 t2 = _mm512_maskz_unpacklo_ps(0xFFFF, w2, w3), t3 = _mm512_maskz_unpackhi_ps(0xFFFF, w2, w3);
  const __m512 u0 = _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));  // counters 4L
  const __m512 u1 = _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));  // 4L + 1
  const __m512 u2 = _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));  // 4L + 2
  const __m512 u3 = _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));  // 4L + 3
  const __m512 v0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u0, u1, _MM_SHUFFLE(1, 0, 1, 0));  // 0 4 1 5
  const __m512 v1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u2, u3, _MM_SHUFFLE(1, 0, 1, 0));  // 2 6 3 7
  const __m512 v2 = _mm512_maskz_shuffle_f32x4(0xFFFF, u0, u1, _MM_SHUFFLE(3, 2, 3, 2));  // 8 12 9 13
  const __m512 v3 = _mm512_maskz_shuffle_f32x4(0xFFFF, u2, u3, _MM_SHUFFLE(3, 2, 3, 2));  // 10 14 11 15
  const __m512 out[4] = {_mm512_maskz_shuffle_f32x4(0xFFFF, v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_maskz_shuffle_f32x4(0xFFFF, v0, v1, _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_maskz_shuffle_f32x4(0xFFFF, v2, v3, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_maskz_shuffle_f32x4(0xFFFF, v2, v3, _MM_SHUFFLE(3, 1, 3, 1))};
  for (int j = 0; j < 4; ++j) {  // masked stores: only the m outputs wanted
    const int64_t k = std::min<int64_t>(16, m - 16 * j);
    if (k <= 0) break;
    _mm512_mask_storeu_ps(o + 16 * j, static_cast<__mmask16>((1u << k) - 1), out[j]);
  }
}

TS_AVX2 void mulhilo8(__m256i a, __m256i b, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, b);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// The same on 8 counters (32 outputs), for AVX2.
TS_AVX2 void philox_uniform8(uint64_t b0, uint32_t ka, uint32_t offset, const uint32_t key[2],
                             float* o, int64_t m) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0))), idx);
  // Unsigned lo < idx (a carry out of the low word) as a signed compare of
  // both sides with the sign bit flipped; the mask is -1 where it carries.
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(idx, sign), _mm256_xor_si256(lo, sign));
  __m256i c0 = lo;
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(b0 >> 32)), carry);
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(ka));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(offset));
  uint32_t k0 = key[0], k1 = key[1];
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(c0, m0, hi0, lo0);
    mulhilo8(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m256 scale = _mm256_set1_ps(static_cast<float>(kTwoPow24Inv));
  const __m256 w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c0, 8)), scale);
  const __m256 w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c1, 8)), scale);
  const __m256 w2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c2, 8)), scale);
  const __m256 w3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c3, 8)), scale);
  // The 4 x 8 transpose into o[4b + j], as in philox_uniform16.
  const __m256 t0 = _mm256_unpacklo_ps(w0, w1), t1 = _mm256_unpackhi_ps(w0, w1);
  const __m256 t2 = _mm256_unpacklo_ps(w2, w3), t3 = _mm256_unpackhi_ps(w2, w3);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));  // counters 0, 4
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));  // 1, 5
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));  // 2, 6
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));  // 3, 7
  alignas(32) float buf[32];
  float* dst = m == 32 ? o : buf;  // a partial group through a buffer: no write past m
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u1, 0x20));
  _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
  _mm256_storeu_ps(dst + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
  if (dst == buf)
    for (int64_t t = 0; t < m; ++t) o[t] = buf[t];
}
#endif

struct PhiloxKernel : Kernel {
  bool normal = false;
  uint32_t key_attr = 0;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const uint64_t seed = static_cast<uint64_t>(*in[0].as<int64_t>());
    const uint32_t offset = static_cast<uint32_t>(*in[1].as<int64_t>());
    const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    const uint32_t ka = key_attr;
    float* o = out[0].as<float>();
    const int64_t n = out[0].numel();
    if (normal) {
      parallel_for(n, n > kParallelMin / 8, [&](int64_t i) {
        const uint64_t u = static_cast<uint64_t>(i);
        const uint32_t c[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), ka, offset};
        uint32_t x[4];
        philox4x32_10(c, key, x);
        const double u1 = (static_cast<double>(x[0] >> 8) + 1.0) * kTwoPow24Inv;
        const double u2 = static_cast<double>(x[1] >> 8) * kTwoPow24Inv;
        o[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      });
      return;
    }
#if TS_X86
    const CpuIsa isa = cpu_isa();
    if (isa == CpuIsa::Avx512) {
      const int64_t groups = (n + 63) / 64;  // 16 counters, 64 outputs each
      parallel_for(groups, n > kParallelMin, [&](int64_t g) {
        philox_uniform16(static_cast<uint64_t>(g) * 16, ka, offset, key, o + g * 64,
                         std::min<int64_t>(64, n - g * 64));
      });
      return;
    }
    if (isa == CpuIsa::Avx2) {
      const int64_t groups = (n + 31) / 32;  // 8 counters, 32 outputs each
      parallel_for(groups, n > kParallelMin, [&](int64_t g) {
        philox_uniform8(static_cast<uint64_t>(g) * 8, ka, offset, key, o + g * 32,
                        std::min<int64_t>(32, n - g * 32));
      });
      return;
    }
#endif
    const int64_t blocks = (n + 3) / 4;
    parallel_for(blocks, n > kParallelMin, [&](int64_t b) {
      const uint64_t u = static_cast<uint64_t>(b);
      const uint32_t c[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), ka, offset};
      uint32_t x[4];
      philox4x32_10(c, key, x);
      const int64_t m = std::min<int64_t>(4, n - b * 4);
      for (int64_t j = 0; j < m; ++j)
        o[b * 4 + j] = static_cast<float>(x[j] >> 8) * static_cast<float>(kTwoPow24Inv);
    });
  }
};

template <bool Normal>
std::unique_ptr<Kernel> philox_make(const KernelCtx& kc) {
  auto k = std::make_unique<PhiloxKernel>();
  k->normal = Normal;
  k->key_attr = static_cast<uint32_t>(kc.node.attr_int("key"));
  return k;
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  OpDef uniform{"trainstep.philox_uniform.default",
                "float32 uniform [0,1) of attr shape from Philox4x32-10 of inputs seed, offset (0-d int64) and attr key",
                &philox_infer, &philox_make<false>, false};
  uniform.random = true;
  r.add(std::move(uniform));
  OpDef normal{"trainstep.philox_normal.default",
               "float32 standard normal of attr shape: Box-Muller (in double) on Philox4x32-10 of seed, offset, key",
               &philox_infer, &philox_make<true>, false};
  normal.random = true;
  r.add(std::move(normal));
}

}  // namespace ts

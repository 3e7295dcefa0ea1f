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
// High 32 bits of each lane's 32x32 product. (The maskz forms with all lanes
// set: GCC 12's plain forms warn about their undefined pass-through.)
TS_AVX512 __m512i mulhi16(__m512i a, __m512i b) {
  const __m512i even = _mm512_maskz_srli_epi64(0xFF, _mm512_maskz_mul_epu32(0xFF, a, b), 32);
  const __m512i odd = _mm512_maskz_mul_epu32(0xFF, _mm512_maskz_srli_epi64(0xFF, a, 32),
                                             _mm512_maskz_srli_epi64(0xFF, b, 32));
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
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
    const __m512i hi0 = mulhi16(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
    const __m512i hi1 = mulhi16(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m512 scale = _mm512_set1_ps(static_cast<float>(kTwoPow24Inv));
  alignas(64) float w[4][16];
  const __m512i words[4] = {c0, c1, c2, c3};
  for (int j = 0; j < 4; ++j)
    _mm512_store_ps(w[j], _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, words[j], 8)), scale));
  for (int64_t t = 0; t < m; ++t) o[t] = w[t & 3][t >> 2];
}

TS_AVX2 __m256i mulhi8(__m256i a, __m256i b) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, b), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
  return _mm256_blend_epi32(even, odd, 0xAA);
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
    const __m256i hi0 = mulhi8(c0, m0), lo0 = _mm256_mullo_epi32(c0, m0);
    const __m256i hi1 = mulhi8(c2, m1), lo1 = _mm256_mullo_epi32(c2, m1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m256 scale = _mm256_set1_ps(static_cast<float>(kTwoPow24Inv));
  alignas(32) float w[4][8];
  const __m256i words[4] = {c0, c1, c2, c3};
  for (int j = 0; j < 4; ++j)
    _mm256_store_ps(w[j], _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(words[j], 8)), scale));
  for (int64_t t = 0; t < m; ++t) o[t] = w[t & 3][t >> 2];
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
    if (cpu_isa() == CpuIsa::Avx512) {
      const int64_t groups = (n + 63) / 64;  // 16 counters, 64 outputs each
      parallel_for(groups, n > kParallelMin, [&](int64_t g) {
        philox_uniform16(static_cast<uint64_t>(g) * 16, ka, offset, key, o + g * 64,
                         std::min<int64_t>(64, n - g * 64));
      });
      return;
    }
    if (cpu_isa() == CpuIsa::Avx2) {
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
  r.add(OpDef{"trainstep.philox_uniform.default",
              "float32 uniform [0,1) of attr shape from Philox4x32-10 of inputs seed, offset (0-d int64) and attr key",
              &philox_infer, &philox_make<false>, false});
  r.add(OpDef{"trainstep.philox_normal.default",
              "float32 standard normal of attr shape: Box-Muller (in double) on Philox4x32-10 of seed, offset, key",
              &philox_infer, &philox_make<true>, false});
}

}  // namespace ts

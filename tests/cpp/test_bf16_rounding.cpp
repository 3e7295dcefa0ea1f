// float32 -> bfloat16 rounding against a reference that shares no code or
// bit tricks with include/trainstep/bfloat16.h: the value is scaled by its
// bfloat16 step (frexp) and rounded to an integer in double arithmetic,
// where round-half-even on the step count is round-half-even on the last
// bfloat16 bit. Checked over a strided sweep of all 2^32 float bit
// patterns, every tie of every exponent, and the patterns beside the ties,
// through float_to_bf16, floats_to_bf16 and round_floats_to_bf16 (AVX2
// loops with scalar tails) and cast_buffer (float32 and float64 sources).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/broadcast.h"
#include "trainstep/bfloat16.h"

using namespace ts;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The bfloat16 bits torch gives for f: round to nearest, ties to even,
// overflow to inf; every NaN 0x7FC0.
uint16_t reference_bf16(float f) {
  if (std::isnan(f)) return 0x7FC0;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7F80;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 8 significant bits; below 2^-126 the subnormal step 2^-133.
  const double step = std::ldexp(1.0, std::max(e, -125) - 8);
  const double q = a / step;                 // exact: a power-of-two scale
  const double r = std::nearbyint(q);        // ties to even (FE_TONEAREST)
  const double v = r * step;
  if (v >= std::ldexp(1.0, 128)) return sign | 0x7F80;  // past the largest bfloat16
  const float vf = static_cast<float>(v);    // exact: 8 significant bits
  uint32_t u;
  std::memcpy(&u, &vf, 4);
  EXPECT_EQ(u & 0xFFFFu, 0u) << "reference is not a bfloat16 for " << f;
  return static_cast<uint16_t>(sign | (u >> 16));
}

// The patterns to check: every `stride`-th of all 2^32, then for every sign
// and exponent field (subnormals included) each tie (low half 0x8000) and
// the patterns one below and above it.
std::vector<uint32_t> patterns(uint32_t stride) {
  std::vector<uint32_t> p;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += stride) p.push_back(static_cast<uint32_t>(u));
  for (uint32_t s = 0; s < 2; ++s)
    for (uint32_t e = 0; e < 255; ++e)
      for (uint32_t m = 0; m < 128; ++m) {
        const uint32_t tie = (s << 31) | (e << 23) | (m << 16) | 0x8000u;
        p.insert(p.end(), {tie - 1, tie, tie + 1});
      }
  // The edges: the largest floats, the least subnormals, zeros, infs, NaNs.
  for (uint32_t u : {0x7F7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0xFF7FFFFFu, 0x00000001u, 0x00008000u,
                     0x00018000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu,
                     0x7F800001u})
    p.push_back(u);
  return p;
}

class Bf16Rounding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);
    pats_ = new std::vector<uint32_t>(patterns(97));
    want_ = new std::vector<uint16_t>(pats_->size());
    for (size_t i = 0; i < pats_->size(); ++i) (*want_)[i] = reference_bf16(from_bits((*pats_)[i]));
  }
  static void TearDownTestSuite() {
    delete pats_;
    delete want_;
  }
  // Counts mismatches, reporting the first few.
  static void expect_all(const std::vector<uint16_t>& got, const char* what) {
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == (*want_)[i]) continue;
      if (++bad <= 5)
        ADD_FAILURE() << what << ": float bits 0x" << std::hex << (*pats_)[i] << " gave 0x" << got[i]
                      << ", expected 0x" << (*want_)[i];
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " patterns rounded wrongly";
  }
  static std::vector<float> floats() {
    std::vector<float> f(pats_->size());
    std::memcpy(f.data(), pats_->data(), f.size() * 4);
    return f;
  }
  static std::vector<uint32_t>* pats_;
  static std::vector<uint16_t>* want_;
};
std::vector<uint32_t>* Bf16Rounding::pats_ = nullptr;
std::vector<uint16_t>* Bf16Rounding::want_ = nullptr;

TEST_F(Bf16Rounding, ReferenceKnownValues) {
  EXPECT_EQ(reference_bf16(1.0f), 0x3F80);
  EXPECT_EQ(reference_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(reference_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(reference_bf16(from_bits(0x7F7F8000u)), 0x7F80);  // tie past the max -> inf
  EXPECT_EQ(reference_bf16(from_bits(0x00008000u)), 0x0000);  // subnormal tie -> 0
  EXPECT_EQ(reference_bf16(from_bits(0x80018000u)), 0x8002);
}

TEST_F(Bf16Rounding, FloatToBf16) {
  std::vector<uint16_t> got(pats_->size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = float_to_bf16(from_bits((*pats_)[i]));
  expect_all(got, "float_to_bf16");
}

TEST_F(Bf16Rounding, FloatsToBf16) {
  const std::vector<float> f = floats();
  std::vector<uint16_t> got(f.size());
  floats_to_bf16(f.data(), got.data(), static_cast<int64_t>(f.size()));
  expect_all(got, "floats_to_bf16");
}

// The fused kernels' in-place form: each float becomes its bfloat16 value.
TEST_F(Bf16Rounding, RoundFloatsInPlace) {
  std::vector<float> f = floats();
  round_floats_to_bf16(f.data(), static_cast<int64_t>(f.size()));
  std::vector<uint16_t> got(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &f[i], 4);
    got[i] = (u & 0xFFFFu) == 0 ? static_cast<uint16_t>(u >> 16) : 0xDEAD;  // low half must be 0
  }
  expect_all(got, "round_floats_to_bf16");
}

// Every length and start, so the vector loops' bodies and tails both run
// (unaligned too): the same bits as the one-value rule.
TEST_F(Bf16Rounding, VectorLoopsAndTailsAgree) {
  const std::vector<float> f = floats();
  for (int64_t start = 0; start < 3; ++start)
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<uint16_t> b(n + 1, 0x1234);
      std::vector<float> r(f.begin() + start, f.begin() + start + n), w(n + 1, 7.f);
      floats_to_bf16(f.data() + start, b.data(), n);
      round_floats_to_bf16(r.data(), n);
      bf16_to_floats(b.data(), w.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t want = (*want_)[start + i];
        ASSERT_EQ(b[i], want) << "n " << n << " start " << start << " i " << i;
        uint32_t ru, wu;
        std::memcpy(&ru, &r[i], 4);
        std::memcpy(&wu, &w[i], 4);
        ASSERT_EQ(ru, uint32_t(want) << 16) << "n " << n << " i " << i;
        ASSERT_EQ(wu, uint32_t(want) << 16) << "n " << n << " i " << i;
      }
      ASSERT_EQ(b[n], 0x1234) << "floats_to_bf16 wrote past n " << n;
      ASSERT_EQ(w[n], 7.f) << "bf16_to_floats wrote past n " << n;
    }
}

TEST_F(Bf16Rounding, CastBufferFromFloat32) {
  const std::vector<float> f = floats();
  std::vector<uint16_t> got(f.size());
  cast_buffer(f.data(), DType::F32, got.data(), DType::BF16, static_cast<int64_t>(f.size()));
  expect_all(got, "cast_buffer float32");
}

// A double becomes float32 first (as torch converts), then bfloat16; the
// float32 patterns as doubles are exact, so the expected bits are the same.
TEST_F(Bf16Rounding, CastBufferFromFloat64) {
  const std::vector<float> f = floats();
  std::vector<double> d(f.begin(), f.end());
  std::vector<uint16_t> got(d.size());
  cast_buffer(d.data(), DType::F64, got.data(), DType::BF16, static_cast<int64_t>(d.size()));
  expect_all(got, "cast_buffer float64");
  // Two roundings: 1 + 2^-8 + 2^-30 is float32 1 + 2^-8, a tie, -> 1.0.
  const double twice = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  uint16_t b;
  cast_buffer(&twice, DType::F64, &b, DType::BF16, 1);
  EXPECT_EQ(b, 0x3F80);
  EXPECT_EQ(double_to_bf16(twice), 0x3F80);
}

// bfloat16 -> float32 is exact, and rounding it back gives the same bits.
TEST_F(Bf16Rounding, RoundTripIsExact) {
  std::vector<uint16_t> all(1 << 16);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size());
  cast_buffer(all.data(), DType::BF16, f.data(), DType::F32, static_cast<int64_t>(all.size()));
  std::vector<uint16_t> back(all.size());
  cast_buffer(f.data(), DType::F32, back.data(), DType::BF16, static_cast<int64_t>(f.size()));
  for (uint32_t i = 0; i < all.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &f[i], 4);
    ASSERT_EQ(u, i << 16) << "bfloat16 0x" << std::hex << i;
    if (std::isnan(f[i]))
      ASSERT_EQ(back[i], 0x7FC0) << "bfloat16 0x" << std::hex << i;
    else
      ASSERT_EQ(back[i], all[i]) << "bfloat16 0x" << std::hex << i;
  }
}

}  // namespace

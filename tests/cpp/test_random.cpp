#include <cmath>

#include "elem_test_util.h"
#include "isa_levels.h"
#include "ops/philox.h"

using namespace elemtest;

TEST(Random, PhiloxKnownAnswers) {
  uint32_t out[4];
  const uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
  ts::philox4x32_10(c0, k0, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  const uint32_t c1[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, k1[2] = {0xffffffffu, 0xffffffffu};
  ts::philox4x32_10(c1, k1, out);
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

// At every ISA level this CPU has (isa_levels.h): the same bits from the
// AVX-512, AVX2 and scalar paths, tails of each vector width included.
TEST(Random, UniformMatchesSpec) {
  isatest::for_each_isa([](ts::CpuIsa) {
    const int64_t seed = 0x123456789abcLL, offset = 77, key = 5;
    Arg s = tensor(DType::I64, {}, {0}), o = tensor(DType::I64, {}, {static_cast<double>(offset)});
    s.data<int64_t>()[0] = seed;
    for (Shape shape : {Shape{7}, Shape{31}, Shape{33}, Shape{65}, Shape{300, 301}}) {
      auto u = run("trainstep.philox_uniform.default", {{"shape", shape}, {"key", key}}, {s, o});
      EXPECT_EQ(u[0].tensor().dtype, DType::F32);
      EXPECT_EQ(u[0].tensor().shape, shape);
      const uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(static_cast<uint64_t>(seed) >> 32)};
      double mean = 0;
      for (int64_t i = 0; i < u[0].numel(); ++i) {
        const uint32_t c[4] = {static_cast<uint32_t>(i >> 2), 0, static_cast<uint32_t>(key), static_cast<uint32_t>(offset)};
        uint32_t x[4];
        ts::philox4x32_10(c, k, x);
        const float want = static_cast<float>(x[i & 3] >> 8) / 16777216.0f;
        const float got = u[0].data<float>()[i];
        ASSERT_EQ(got, want) << i;
        ASSERT_GE(got, 0.0f);
        ASSERT_LT(got, 1.0f);
        mean += got;
      }
      if (u[0].numel() > 1000) {
        EXPECT_NEAR(mean / u[0].numel(), 0.5, 0.01);
      }
    }
    // A different offset or key changes the stream.
    auto a = run("trainstep.philox_uniform.default", {{"shape", {4}}, {"key", 1}}, {s, o});
    auto b = run("trainstep.philox_uniform.default", {{"shape", {4}}, {"key", 2}}, {s, o});
    EXPECT_NE(a[0].data<float>()[0], b[0].data<float>()[0]);
  });
}

TEST(Random, NormalMatchesSpec) {
  Arg s = tensor(DType::I64, {}, {42}), o = tensor(DType::I64, {}, {3});
  auto n = run("trainstep.philox_normal.default", {{"shape", {200, 300}}, {"key", 9}}, {s, o});
  const uint32_t k[2] = {42, 0};
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n[0].numel(); ++i) {
    const float got = n[0].data<float>()[i];
    if (i < 100) {
      const uint32_t c[4] = {static_cast<uint32_t>(i), 0, 9, 3};
      uint32_t x[4];
      ts::philox4x32_10(c, k, x);
      const double u1 = ((x[0] >> 8) + 1.0) / 16777216.0, u2 = (x[1] >> 8) / 16777216.0;
      ASSERT_EQ(got, static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2))) << i;
    }
    ASSERT_TRUE(std::isfinite(got));
    sum += got;
    sq += double(got) * got;
  }
  const double m = sum / n[0].numel();
  EXPECT_NEAR(m, 0, 0.02);
  EXPECT_NEAR(sq / n[0].numel() - m * m, 1, 0.03);
  expect_error([&] { infer("trainstep.philox_uniform.default", {{"shape", {2}}, {"key", 1}}, {tensor(DType::F32, {}, {1}), o}); },
               "must be int64");
}

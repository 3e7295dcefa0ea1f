// The vector math (ops/vmath.h) against double-precision references: within
// 4 ULP of the float result over wide ranges, exact special values (NaN,
// infinities, signed zero, overflow and underflow), every tail length, and
// in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "isa_levels.h"
#include "ops/vmath.h"

namespace {

using VFn = void (*)(const float*, float*, int64_t);

// Distance in representable floats between a and b (same sign assumed
// for finite values; special values must match exactly).
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (std::isinf(a) || std::isinf(b)) return a == b ? 0 : INT64_MAX;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

void check(const std::string& name, VFn f, double (*ref)(double), float lo, float hi) {
  SCOPED_TRACE(name);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.f, -0.f, inf, -inf, nan, 1e-40f, -1e-40f, 100.f, -100.f, 1.f, -1.f};
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int i = 0; i < 4000; ++i) x.push_back(u(rng));
  std::vector<float> y(x.size());
  // Every tail length of the vector loop, then the whole array in place.
  for (int64_t n = 0; n <= 33; ++n) {
    f(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = static_cast<float>(ref(x[i]));
      if (std::isnan(want) && std::isnan(y[i])) continue;
      EXPECT_LE(ulps(y[i], want), 4) << "x=" << x[i] << " got " << y[i] << " want " << want;
    }
  }
  std::vector<float> z = x;
  f(z.data(), z.data(), static_cast<int64_t>(z.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(ref(x[i]));
    if (std::isnan(want) && std::isnan(z[i])) continue;
    EXPECT_LE(ulps(z[i], want), 4) << "x=" << x[i] << " got " << z[i] << " want " << want;
  }
}

// At every ISA level this CPU has (isa_levels.h).
TEST(VectorMath, WithinFourUlpOfDouble) {
  isatest::for_each_isa([](ts::CpuIsa) {
    check("exp", ts::vexp, [](double v) { return std::exp(v); }, -100.f, 90.f);
    check("log", ts::vlog, [](double v) { return std::log(v); }, 1e-30f, 1e30f);
    check("erf", ts::verf, [](double v) { return std::erf(v); }, -5.f, 5.f);
    check("tanh", ts::vtanh, [](double v) { return std::tanh(v); }, -10.f, 10.f);
  });
}

}  // namespace

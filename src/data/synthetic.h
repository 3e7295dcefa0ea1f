// Generated regression data with a known answer: Friedman's function #1
// (Friedman 1991, "Multivariate adaptive regression splines"; sklearn's
// make_friedman1). x ~ U[0, 1]^10, of which the last five are irrelevant,
//   y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + sigma * e,
// e ~ N(0, 1). The best possible test MSE is sigma^2, so a model's test
// loss says how close it gets. A sample is float32 x[10] and float32 y[1].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trainstep/dataset.h"

namespace ts {

struct Friedman1Dataset : Dataset {
  static constexpr int64_t kFeatures = 10;
  int64_t n = 0;
  double sigma = 1.0;
  std::vector<float> x;  // n * kFeatures
  std::vector<float> y;  // n

  int64_t size() const override { return n; }
  std::string describe() const override;
  std::vector<Field> fields() const override;  // x float32[10], y float32[]
  void read(int64_t i, const ReadContext& c, void* const* out) const override;
};

// The noise-free function.
double friedman1(const float* x);

// n samples from a generator seeded by `seed` (train and test use different
// seeds); the same arguments always give the same data.
Friedman1Dataset make_friedman1(int64_t n, double sigma, uint64_t seed);

}  // namespace ts

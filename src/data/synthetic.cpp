#include "data/synthetic.h"

#include <cmath>
#include <random>

#include "trainstep/error.h"

namespace ts {

double friedman1(const float* x) {
  return 10.0 * std::sin(M_PI * x[0] * x[1]) + 20.0 * (x[2] - 0.5) * (x[2] - 0.5) + 10.0 * x[3] +
         5.0 * x[4];
}

Friedman1Dataset make_friedman1(int64_t n, double sigma, uint64_t seed) {
  Friedman1Dataset d;
  d.n = n;
  d.sigma = sigma;
  d.x.resize(static_cast<size_t>(n * d.kFeatures));
  d.y.resize(static_cast<size_t>(n));
  // mt19937_64's sequence is fixed by the standard; the conversions to
  // uniform and normal values are ours (std's distributions vary by library).
  std::mt19937_64 gen(seed);
  auto uniform = [&] { return double(gen() >> 11) * 0x1p-53; };  // [0, 1)
  auto normal = [&] {  // Box-Muller
    double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  for (int64_t i = 0; i < n; ++i) {
    float* xi = d.x.data() + i * d.kFeatures;
    for (int64_t k = 0; k < d.kFeatures; ++k) xi[k] = static_cast<float>(uniform());
    d.y[i] = static_cast<float>(friedman1(xi) + sigma * normal());
  }
  return d;
}

std::string Friedman1Dataset::describe() const {
  return "Friedman #1 regression samples (float32 x[10], float32 y, noise sd " +
         std::to_string(sigma) + ")";
}

std::vector<Field> Friedman1Dataset::fields() const {
  return {{"x", DType::F32, {kFeatures}}, {"y", DType::F32, {}}};
}

void Friedman1Dataset::read(int64_t i, const ReadContext&, void* const* out) const {
  if (float* dst = static_cast<float*>(out[0]))
    for (int64_t k = 0; k < kFeatures; ++k) dst[k] = x[i * kFeatures + k];
  if (out[1]) *static_cast<float*>(out[1]) = y[i];
}

}  // namespace ts

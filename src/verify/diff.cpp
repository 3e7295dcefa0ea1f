#include "verify/diff.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "trainstep/bfloat16.h"
#include "trainstep/error.h"

namespace ts {

double element(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.as<float>()[i];
    case DType::F64: return t.as<double>()[i];
    case DType::I64: return static_cast<double>(t.as<int64_t>()[i]);
    case DType::I32: return t.as<int32_t>()[i];
    case DType::U8: return t.as<uint8_t>()[i];
    case DType::Bool: return t.as<bool>()[i];
    case DType::BF16: return bf16_to_float(t.as<uint16_t>()[i]);
  }
  return 0;
}

// An update is only resolved to the rounding of the state it was added to
// (a running_var near 1 moved by momentum 3e-4 is stored to 6e-8), so with
// `base` each element's error counts beyond one rounding of the larger of
// the two.
Diff compare(const Tensor& got, const Tensor& want, const std::string& what, const Tensor* base,
             double min_scale) {
  if (got.type() != want.type())
    fail(what + ": got " + got.type().str() + ", golden is " + want.type().str());
  if (base && base->type() != want.type())
    fail(what + ": the initial state is " + base->type().str() + ", golden is " +
         want.type().str());
  auto b = [&](int64_t i) { return base ? element(*base, i) : 0.0; };
  const double eps = !base ? 0.0
                     : want.dtype == DType::F32 ? std::numeric_limits<float>::epsilon()
                     : want.dtype == DType::F64 ? std::numeric_limits<double>::epsilon()
                                                : 0.0;
  Diff d;
  d.scale = min_scale;
  for (int64_t i = 0; i < want.numel(); ++i)
    d.scale = std::max(d.scale, std::fabs(element(want, i) - b(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = element(got, i) - b(i), w = element(want, i) - b(i);
    if (!std::isfinite(g) && std::isfinite(w)) d.nonfinite = true;
    const double rounding = eps * std::max(std::fabs(element(want, i)), std::fabs(b(i)));
    double a = std::max(0.0, std::fabs(g - w) - rounding);
    d.max_abs = std::max(d.max_abs, a);
    d.max_rel = std::max(d.max_rel, a / std::max(std::fabs(w), 1e-30));
  }
  return d;
}

bool within(const Diff& d, double tol) {
  return !d.nonfinite && d.max_abs <= tol * std::max(d.scale, 1e-12);
}

}  // namespace ts

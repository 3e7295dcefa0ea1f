// How far a tensor is from its golden counterpart (verify's measure).
#pragma once
#include <algorithm>
#include <string>

#include "trainstep/tensor.h"

namespace ts {

// Element i of any dtype, as a double.
double element(const Tensor& t, int64_t i);

struct Diff {
  double max_abs = 0, max_rel = 0, scale = 0;
  bool nonfinite = false;  // got is NaN or inf where want is finite
};

// got against want; with `base`, their differences from it (the step's
// update) against each other, at the update's own scale. `scale` is at
// least min_scale. Throws ts::Error naming `what` when the types differ.
Diff compare(const Tensor& got, const Tensor& want, const std::string& what,
             const Tensor* base = nullptr, double min_scale = 0);

// max_abs relative to the scale (a scale near 0 counts as 1e-12).
inline double of_scale(const Diff& d) { return d.max_abs / std::max(d.scale, 1e-12); }

// Whether d is within tol of the scale.
bool within(const Diff& d, double tol);

}  // namespace ts

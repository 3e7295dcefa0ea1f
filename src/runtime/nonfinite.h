// Finds NaN and inf in float tensors, fast enough to run after every
// training step (Session's NonFinite check): a vectorized integer scan of
// the exponent bits, split over the OpenMP threads for large tensors.
#pragma once
#include <cstdint>

#include "trainstep/tensor.h"

namespace ts {

// Index of the first NaN or inf element of t, or -1 (always -1 for integer
// and bool tensors). `threads` as the session's (0: OpenMP's default).
// Allocates nothing.
int64_t first_nonfinite(const Tensor& t, int threads);

}  // namespace ts

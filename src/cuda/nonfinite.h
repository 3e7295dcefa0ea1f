// NaN/inf counting on the device (nonfinite.cu), for the session's
// NonFinite check after each step.
#pragma once
#include "cuda/launch.h"

namespace ts::cuda {

struct FiniteCheck {
  const void* data = nullptr;
  int64_t numel = 0;
  bool f64 = false;  // else float32
};

// Adds 1 to *flag (per block that saw one) when t has a NaN or inf.
void launch_count_nonfinite(const FiniteCheck& t, int* flag, cudaStream_t s);

}  // namespace ts::cuda

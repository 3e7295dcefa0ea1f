#include "runtime/nonfinite_policy.h"

namespace ts {

void NonFinitePolicy::step_failed(const std::string& what, int64_t step) {
  if (mode_ == NonFinite::Stop)
    fail("step " + std::to_string(step) + ": " + what +
         " (--on-nonfinite skip drops such steps instead)");
  ++skipped_;
  last_skipped_ = true;
}

void NonFinitePolicy::micro_failed(const std::string& what, int64_t step, int64_t micro) {
  if (mode_ == NonFinite::Stop)
    fail("step " + std::to_string(step) + ", micro-batch " + std::to_string(micro) + ": " + what +
         " (--on-nonfinite skip drops such steps instead)");
  pending_ = true;
}

}  // namespace ts

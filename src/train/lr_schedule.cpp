#include "train/lr_schedule.h"

#include <cstdlib>

#include "trainstep/error.h"

namespace ts {

LrSchedule LrSchedule::parse(const std::string& spec) {
  LrSchedule s;
  s.spec_ = spec.empty() ? "constant" : spec;
  if (s.spec_ == "constant") return s;
  if (s.spec_.rfind("step:", 0) == 0) {
    const char* p = s.spec_.c_str() + 5;
    char* end = nullptr;
    long long size = std::strtoll(p, &end, 10);
    if (end != p && *end == ':') {
      const char* g = end + 1;
      double gamma = std::strtod(g, &end);
      if (end != g && *end == '\0' && size > 0 && gamma > 0) {
        s.step_size_ = size;
        s.gamma_ = gamma;
        return s;
      }
    }
  }
  fail("bad --lr-schedule '" + spec + "' (expected 'constant' or 'step:STEP_SIZE:GAMMA')");
}

double LrSchedule::at_epoch(double base, int64_t epoch) const {
  if (step_size_ == 0) return base;
  // torch's StepLR multiplies by gamma at each boundary (chainable form);
  // repeated multiplication reproduces its float64 sequence exactly.
  double lr = base;
  for (int64_t e = 1; e <= epoch; ++e)
    if (e % step_size_ == 0) lr *= gamma_;
  return lr;
}

}  // namespace ts

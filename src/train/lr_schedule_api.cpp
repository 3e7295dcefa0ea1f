// ts::check_lr_schedule and ts::lr_sequence (trainstep/lr_schedule.h): the
// public face of LrSchedule (train/lr_schedule.h), whose class stays internal
// so its parts and cursor can change without breaking programs built on it.
#include "trainstep/lr_schedule.h"

#include "train/lr_schedule.h"

namespace ts {

void check_lr_schedule(const std::string& spec) { LrSchedule::parse(spec); }

std::vector<double> lr_sequence(const std::string& spec, double base_lr, int64_t n) {
  return LrSchedule::parse(spec).sequence(base_lr, n);
}

}  // namespace ts

// Learning-rate schedules, public: the LR sequence a schedule spec gives,
// as the trainer steps it (TrainOptions::lr_schedule takes the same specs;
// docs/training.md "LR schedules" lists them). It is what `trainstep
// lr-schedule` prints; a program of its own can check a spec before a run,
// or plot what a run will use, without an artifact.
//
// Each sequence reproduces torch.optim.lr_scheduler's float64 LRs exactly.
// Index t counts scheduler.step() calls made so far: value 0 is the LR right
// after constructing the torch scheduler, value t the LR after t calls.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

// Throws ts::Error when `spec` is not a schedule spec: one line naming the
// spec, why, and the forms a spec may take. Returns nothing otherwise, so a
// caller can reject a bad --lr-schedule before loading anything.
void check_lr_schedule(const std::string& spec);

// The first n LRs of `spec` from base LR `base_lr` (n >= 0). Throws
// ts::Error for a bad spec (as check_lr_schedule) and for a schedule that
// cannot be stepped that far (onecycle past TOTAL_STEPS, as in torch).
std::vector<double> lr_sequence(const std::string& spec, double base_lr, int64_t n);

}  // namespace ts

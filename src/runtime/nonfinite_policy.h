// What a session does with an optimizer step whose loss or new state is
// not finite (SessionOptions::on_nonfinite): nothing, stop with the step and
// tensor named, or drop the step and count it.
#pragma once
#include <cstdint>
#include <string>

#include "trainstep/options.h"

namespace ts {

class NonFinitePolicy {
 public:
  explicit NonFinitePolicy(NonFinite mode) : mode_(mode) {}
  bool checks() const { return mode_ != NonFinite::Ignore; }

  // Step `step` gave `what` (a description; "" when a micro-batch did):
  // throws in Stop mode; in Skip mode counts the step as skipped (the old
  // state is intact: no donation in that mode).
  void step_failed(const std::string& what, int64_t step);
  // Micro-batch `micro` of step `step` gave `what`: throws in Stop mode;
  // in Skip mode marks the pending optimizer step to be dropped.
  void micro_failed(const std::string& what, int64_t step, int64_t micro);

  // Per optimizer step: whether the last one was dropped, and whether a
  // micro-batch since the last update was not finite.
  void start_step() { last_skipped_ = false; }
  bool last_skipped() const { return last_skipped_; }
  bool pending() const { return pending_; }
  void set_pending(bool p) { pending_ = p; }
  int64_t skipped() const { return skipped_; }  // kept in checkpoints
  void set_skipped(int64_t n) { skipped_ = n; }

 private:
  NonFinite mode_;
  int64_t skipped_ = 0;
  bool last_skipped_ = false;
  bool pending_ = false;
};

}  // namespace ts

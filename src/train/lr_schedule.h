// Learning-rate schedules, evaluated in C++ so changing one never needs a
// re-export (the LR is a runtime input of the step).
//   "constant"             lr = base
//   "step:S:G"             StepLR(step_size=S, gamma=G), stepped per epoch
#pragma once
#include <string>

namespace ts {

class LrSchedule {
 public:
  static LrSchedule parse(const std::string& spec);  // throws ts::Error
  // LR for a 0-based epoch, as torch.optim.lr_scheduler computes it.
  double at_epoch(double base, int64_t epoch) const;
  const std::string& spec() const { return spec_; }

 private:
  std::string spec_ = "constant";
  int64_t step_size_ = 0;
  double gamma_ = 1.0;
};

}  // namespace ts

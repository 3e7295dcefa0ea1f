// Learning-rate schedules, evaluated in C++ so changing one never needs a
// re-export (the LR is a runtime input of the step). Each reproduces the
// float64 LR sequence of torch.optim.lr_scheduler (torch 1.13) exactly, by
// iterating the same (chainable) recurrences torch's get_lr() uses.
//
// Index t counts scheduler.step() calls made so far: at(base, 0) is the LR
// right after constructing the torch scheduler, at(base, t) the LR after t
// calls. Spec strings:
//   constant                                  lr = base
//   step:STEP_SIZE:GAMMA                      StepLR
//   multistep:M1,M2,...:GAMMA                 MultiStepLR (milestones ascending)
//   exp:GAMMA                                 ExponentialLR
//   cosine:T_MAX[:ETA_MIN]                    CosineAnnealingLR (eta_min 0)
//   linear:START_FACTOR:END_FACTOR:TOTAL_ITERS  LinearLR (warmup)
//   onecycle:MAX_LR:TOTAL_STEPS[:PCT_START[:DIV_FACTOR[:FINAL_DIV_FACTOR[:ANNEAL]]]]
//       OneCycleLR; defaults 0.3, 25, 1e4, cos (ANNEAL cos|linear). The base
//       LR is ignored: torch starts from MAX_LR/DIV_FACTOR. Stepping past
//       TOTAL_STEPS is an error, as in torch.
//   seq:SPEC1|SPEC2|...:M1,M2,...             SequentialLR; one milestone fewer
//       than schedules; sub-schedules may not be onecycle or seq.
// e.g. seq:linear:0.1:1:100|cosine:900:100 (100 warmup steps, then cosine).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

class LrSchedule {
 public:
  static LrSchedule parse(const std::string& spec);  // throws ts::Error
  // LR after t scheduler.step() calls (t >= 0). O(t): use Cursor for runs.
  double at(double base, int64_t t) const;
  // LR for a 0-based epoch when stepped once per epoch (= at(base, epoch)).
  double at_epoch(double base, int64_t epoch) const { return at(base, epoch); }
  // The first n values at(base, 0..n-1).
  std::vector<double> sequence(double base, int64_t n) const;
  const std::string& spec() const { return spec_; }

  // Incremental evaluation: lr() is at(base, t()); step() advances t by one.
  class Cursor {
   public:
    Cursor(const LrSchedule& s, double base);
    double lr() const { return lr_; }
    int64_t t() const { return t_; }
    void step();
    void advance_to(int64_t t) {
      while (t_ < t) step();
    }

   private:
    const LrSchedule* s_;
    double base_, lr_;
    int64_t t_ = 0;
    std::vector<int64_t> last_epoch_;  // per part, as torch's scheduler.last_epoch
  };

  enum class Kind { Constant, Step, MultiStep, Exp, Cosine, Linear, OneCycle };
  struct Part {
    Kind kind = Kind::Constant;
    int64_t step_size = 0, t_max = 0, total_iters = 0, total_steps = 0;
    double gamma = 1, eta_min = 0, start_factor = 1, end_factor = 1;
    std::vector<int64_t> milestones;  // MultiStep (sorted, repeats allowed)
    double max_lr = 0, pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;
    bool anneal_cos = true;
  };

 private:
  std::string spec_ = "constant";
  std::vector<Part> parts_{Part{}};
  std::vector<int64_t> milestones_;  // SequentialLR milestones (parts_.size() - 1)
};

}  // namespace ts

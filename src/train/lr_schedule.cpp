#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "trainstep/error.h"

namespace ts {
namespace {

const char* kForms =
    "expected constant | step:STEP_SIZE:GAMMA | multistep:M1,M2,...:GAMMA | exp:GAMMA | "
    "cosine:T_MAX[:ETA_MIN] | linear:START_FACTOR:END_FACTOR:TOTAL_ITERS | "
    "onecycle:MAX_LR:TOTAL_STEPS[:PCT_START[:DIV_FACTOR[:FINAL_DIV_FACTOR[:cos|linear]]]] | "
    "seq:SPEC1|SPEC2|...:M1,M2,...";

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  fail("bad LR schedule '" + spec + "': " + why + " (" + kForms + ")");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

struct Num {
  const std::string& spec;
  double real(const std::string& s, const char* what) const {
    char* end = nullptr;
    double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v))
      bad(spec, std::string(what) + " '" + s + "' is not a number");
    return v;
  }
  int64_t integer(const std::string& s, const char* what) const {
    char* end = nullptr;
    long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') bad(spec, std::string(what) + " '" + s + "' is not an integer");
    return v;
  }
};

LrSchedule::Part parse_part(const std::string& spec, const std::string& s) {
  using K = LrSchedule::Kind;
  LrSchedule::Part p;
  Num n{spec};
  auto f = split(s, ':');
  const std::string& name = f[0];
  auto want = [&](size_t lo, size_t hi) {
    if (f.size() - 1 < lo || f.size() - 1 > hi)
      bad(spec, "'" + name + "' takes " +
                    (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                    " parameters, got " + std::to_string(f.size() - 1));
  };
  if (name == "constant") {
    want(0, 0);
  } else if (name == "step") {
    want(2, 2);
    p.kind = K::Step;
    p.step_size = n.integer(f[1], "STEP_SIZE");
    p.gamma = n.real(f[2], "GAMMA");
    if (p.step_size <= 0) bad(spec, "STEP_SIZE must be positive");
  } else if (name == "multistep") {
    want(2, 2);
    p.kind = K::MultiStep;
    for (const auto& m : split(f[1], ',')) p.milestones.push_back(n.integer(m, "milestone"));
    if (!std::is_sorted(p.milestones.begin(), p.milestones.end()))
      bad(spec, "milestones must be ascending");
    p.gamma = n.real(f[2], "GAMMA");
  } else if (name == "exp") {
    want(1, 1);
    p.kind = K::Exp;
    p.gamma = n.real(f[1], "GAMMA");
  } else if (name == "cosine") {
    want(1, 2);
    p.kind = K::Cosine;
    p.t_max = n.integer(f[1], "T_MAX");
    if (p.t_max <= 0) bad(spec, "T_MAX must be positive");
    if (f.size() > 2) p.eta_min = n.real(f[2], "ETA_MIN");
  } else if (name == "linear") {
    want(3, 3);
    p.kind = K::Linear;
    p.start_factor = n.real(f[1], "START_FACTOR");
    p.end_factor = n.real(f[2], "END_FACTOR");
    p.total_iters = n.integer(f[3], "TOTAL_ITERS");
    // torch's own checks (start_factor 0 would divide by zero in its recurrence).
    if (p.start_factor <= 0 || p.start_factor > 1) bad(spec, "START_FACTOR must be in (0, 1]");
    if (p.end_factor < 0 || p.end_factor > 1) bad(spec, "END_FACTOR must be in [0, 1]");
    if (p.total_iters <= 0) bad(spec, "TOTAL_ITERS must be positive");
  } else if (name == "onecycle") {
    want(2, 6);
    p.kind = K::OneCycle;
    p.max_lr = n.real(f[1], "MAX_LR");
    p.total_steps = n.integer(f[2], "TOTAL_STEPS");
    if (p.total_steps <= 0) bad(spec, "TOTAL_STEPS must be positive");
    if (f.size() > 3) p.pct_start = n.real(f[3], "PCT_START");
    if (p.pct_start < 0 || p.pct_start > 1) bad(spec, "PCT_START must be in [0, 1]");
    if (f.size() > 4) p.div_factor = n.real(f[4], "DIV_FACTOR");
    if (f.size() > 5) p.final_div_factor = n.real(f[5], "FINAL_DIV_FACTOR");
    if (p.div_factor == 0 || p.final_div_factor == 0) bad(spec, "division factors must be nonzero");
    if (f.size() > 6) {
      if (f[6] != "cos" && f[6] != "linear") bad(spec, "ANNEAL must be cos or linear");
      p.anneal_cos = f[6] == "cos";
    }
  } else {
    bad(spec, "unknown schedule '" + name + "'");
  }
  return p;
}

using K = LrSchedule::Kind;

// torch's get_lr(): the chainable form, from the group's current lr.
double get_lr(const LrSchedule::Part& p, int64_t e, double lr, double base) {
  switch (p.kind) {
    case K::Constant:
      return lr;
    case K::Step:
      if (e == 0 || e % p.step_size != 0) return lr;
      return lr * p.gamma;
    case K::MultiStep: {
      auto c = std::count(p.milestones.begin(), p.milestones.end(), e);
      if (c == 0) return lr;
      return lr * std::pow(p.gamma, static_cast<double>(c));
    }
    case K::Exp:
      return e == 0 ? lr : lr * p.gamma;
    case K::Cosine: {
      const double pi = M_PI, T = static_cast<double>(p.t_max);
      if (e == 0) return lr;
      // Python's % is a floor modulo.
      int64_t m = (e - 1 - p.t_max) % (2 * p.t_max);
      if (m < 0) m += 2 * p.t_max;
      if (m == 0) return lr + (base - p.eta_min) * (1 - std::cos(pi / T)) / 2;
      return (1 + std::cos(pi * static_cast<double>(e) / T)) /
                 (1 + std::cos(pi * static_cast<double>(e - 1) / T)) * (lr - p.eta_min) +
             p.eta_min;
    }
    case K::Linear:
      if (e == 0) return lr * p.start_factor;
      if (e > p.total_iters) return lr;
      return lr * (1. + (p.end_factor - p.start_factor) /
                            (static_cast<double>(p.total_iters) * p.start_factor +
                             static_cast<double>(e - 1) * (p.end_factor - p.start_factor)));
    case K::OneCycle: {
      if (e > p.total_steps)
        fail("LR schedule onecycle: tried to step " + std::to_string(e + 1) +
             " times; TOTAL_STEPS is " + std::to_string(p.total_steps));
      const double initial = p.max_lr / p.div_factor, min_lr = initial / p.final_div_factor;
      const double end0 = p.pct_start * static_cast<double>(p.total_steps) - 1;
      const double end1 = static_cast<double>(p.total_steps - 1);
      auto anneal = [&](double start, double end, double pct) {
        if (p.anneal_cos) return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
        return (end - start) * pct + start;
      };
      const double step = static_cast<double>(e);
      if (step <= end0) return anneal(initial, p.max_lr, (step - 0) / (end0 - 0));
      return anneal(p.max_lr, min_lr, (step - end0) / (end1 - end0));
    }
  }
  return lr;
}

// torch's _get_closed_form_lr() at last_epoch 0, used by SequentialLR when a
// schedule takes over at its milestone (scheduler.step(0)).
double closed_form_at_0(const LrSchedule::Part& p, double base) {
  switch (p.kind) {
    case K::Step:
      return base * std::pow(p.gamma, 0.0);
    case K::MultiStep: {
      auto c = std::upper_bound(p.milestones.begin(), p.milestones.end(), int64_t{0}) -
               p.milestones.begin();
      return base * std::pow(p.gamma, static_cast<double>(c));
    }
    case K::Exp:
      return base * std::pow(p.gamma, 0.0);
    case K::Cosine:
      return p.eta_min + (base - p.eta_min) * (1 + std::cos(M_PI * 0.0 / static_cast<double>(p.t_max))) / 2;
    case K::Linear:
      return base * (p.start_factor + (p.end_factor - p.start_factor) * 0.0 /
                                          static_cast<double>(p.total_iters));
    default:
      return base;  // constant (LambdaLR-like); onecycle is excluded from seq
  }
}

}  // namespace

LrSchedule LrSchedule::parse(const std::string& spec_in) {
  LrSchedule s;
  s.spec_ = spec_in.empty() ? "constant" : spec_in;
  const std::string& spec = s.spec_;
  if (spec.rfind("seq:", 0) == 0) {
    std::string rest = spec.substr(4);
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) bad(spec, "seq needs ':MILESTONES' after the schedules");
    auto subs = split(rest.substr(0, colon), '|');
    if (subs.size() < 2) bad(spec, "seq needs at least two schedules separated by '|'");
    Num n{spec};
    s.milestones_.clear();
    for (const auto& m : split(rest.substr(colon + 1), ','))
      s.milestones_.push_back(n.integer(m, "milestone"));
    if (s.milestones_.size() != subs.size() - 1)
      bad(spec, "seq takes one milestone fewer than schedules");
    if (!std::is_sorted(s.milestones_.begin(), s.milestones_.end()))
      bad(spec, "seq milestones must be ascending");
    s.parts_.clear();
    for (const auto& sub : subs) {
      if (sub.rfind("seq:", 0) == 0 || sub.rfind("onecycle", 0) == 0)
        bad(spec, "seq cannot contain '" + sub.substr(0, sub.find(':')) + "'");
      s.parts_.push_back(parse_part(spec, sub));
    }
    return s;
  }
  s.parts_ = {parse_part(spec, spec)};
  return s;
}

LrSchedule::Cursor::Cursor(const LrSchedule& s, double base)
    : s_(&s), base_(base), lr_(base), last_epoch_(s.parts_.size(), -1) {
  // Constructing the (first) torch scheduler performs one step at last_epoch 0;
  // SequentialLR resets the LR to initial_lr and redoes that for schedule 0.
  last_epoch_[0] = 0;
  lr_ = get_lr(s.parts_[0], 0, base_, base_);
}

void LrSchedule::Cursor::step() {
  ++t_;
  const auto& ms = s_->milestones_;
  size_t idx = std::upper_bound(ms.begin(), ms.end(), t_) - ms.begin();
  const Part& p = s_->parts_[idx];
  if (idx > 0 && ms[idx - 1] == t_) {
    last_epoch_[idx] = 0;
    lr_ = closed_form_at_0(p, base_);
  } else {
    lr_ = get_lr(p, ++last_epoch_[idx], lr_, base_);
  }
}

double LrSchedule::at(double base, int64_t t) const {
  Cursor c(*this, base);
  c.advance_to(t);
  return c.lr();
}

std::vector<double> LrSchedule::sequence(double base, int64_t n) const {
  std::vector<double> out;
  Cursor c(*this, base);
  for (int64_t i = 0; i < n; ++i) {
    if (i) c.step();
    out.push_back(c.lr());
  }
  return out;
}

}  // namespace ts

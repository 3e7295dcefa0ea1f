// `trainstep verify ARTIFACT`: replays the golden trace (eager PyTorch, same
// RNG) in C++ and compares every loss, every final state tensor and the eval
// outputs. Final line: "verify: ok" or "verify: FAILED <what>" (exit status
// 3, exit_codes.h: a mismatch, not an unreadable artifact).
//
// --trace first runs golden step 0 through the unoptimised train_step and
// compares every node's value with the eager value the exporter recorded
// (`export --trace-values`), reporting the first node that diverges.
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "commands.h"
#include "exit_codes.h"
#include "trainstep/error.h"
#include "ir/program.h"
#include "runtime/artifact.h"
#include "runtime/executor.h"
#include "trainstep/session.h"

namespace tscli {

namespace {

struct Diff {
  double max_abs = 0, max_rel = 0, scale = 0;
  bool nonfinite = false;
};

double at(const ts::Tensor& t, int64_t i) {
  switch (t.dtype) {
    case ts::DType::F32: return t.as<float>()[i];
    case ts::DType::F64: return t.as<double>()[i];
    case ts::DType::I64: return static_cast<double>(t.as<int64_t>()[i]);
    case ts::DType::I32: return t.as<int32_t>()[i];
    case ts::DType::U8: return t.as<uint8_t>()[i];
    case ts::DType::Bool: return t.as<bool>()[i];
  }
  return 0;
}

// got against want; with `base`, their differences from it (the step's
// update) against each other, at the update's own scale. An update is only
// resolved to the rounding of the state it was added to (a running_var
// near 1 moved by momentum 3e-4 is stored to 6e-8), so with `base` each
// element's error counts beyond one rounding of the larger of the two.
Diff compare(const ts::Tensor& got, const ts::Tensor& want, const std::string& what,
             const ts::Tensor* base = nullptr, double min_scale = 0) {
  if (got.type() != want.type())
    ts::fail(what + ": got " + got.type().str() + ", golden is " + want.type().str());
  if (base && base->type() != want.type())
    ts::fail(what + ": the initial state is " + base->type().str() + ", golden is " +
             want.type().str());
  auto b = [&](int64_t i) { return base ? at(*base, i) : 0.0; };
  const double eps = !base ? 0.0
                     : want.dtype == ts::DType::F32 ? std::numeric_limits<float>::epsilon()
                     : want.dtype == ts::DType::F64 ? std::numeric_limits<double>::epsilon()
                                                   : 0.0;
  Diff d;
  d.scale = min_scale;
  for (int64_t i = 0; i < want.numel(); ++i)
    d.scale = std::max(d.scale, std::fabs(at(want, i) - b(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = at(got, i) - b(i), w = at(want, i) - b(i);
    if (!std::isfinite(g) && std::isfinite(w)) d.nonfinite = true;
    const double rounding = eps * std::max(std::fabs(at(want, i)), std::fabs(b(i)));
    double a = std::max(0.0, std::fabs(g - w) - rounding);
    d.max_abs = std::max(d.max_abs, a);
    d.max_rel = std::max(d.max_rel, a / std::max(std::fabs(w), 1e-30));
  }
  return d;
}

bool within(const Diff& d, double tol) {
  return !d.nonfinite && d.max_abs <= tol * std::max(d.scale, 1e-12);
}

constexpr double kDefaultTol = 1e-4;

// Each check's tolerance: --tol for all, or from the artifact's calibration
// (golden.calibration, docs/format.md): max(floor of the value's dtype,
// factor x how far eager moved from itself on that value under one
// rounding of noise), or kDefaultTol for an artifact exported without one.
class Tolerance {
 public:
  Tolerance(const ts::Artifact& a, std::optional<double> given) : given_(given) {
    const ts::json& g = a.program.golden;
    if (given_ || !g.contains("calibration")) return;
    const ts::json& c = g.at("calibration");
    auto bad = [&](const std::string& what) {
      ts::fail(a.path + ": golden.calibration." + what + " (export the artifact again)");
    };
    if (!c.is_object()) bad("is not an object");
    auto number = [&](const ts::json& j, const std::string& what) {
      if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < 0)
        bad(what + " is not a number >= 0");
      return j.get<double>();
    };
    if (!c.contains("factor") || !c.contains("floor") || !c.contains("spread"))
      bad("lacks factor, floor or spread");
    factor_ = number(c.at("factor"), "factor");
    if (!c.at("floor").is_object() || !c.at("spread").is_object())
      bad("floor and spread must be objects");
    for (const auto& [k, v] : c.at("floor").items()) floor_[k] = number(v, "floor." + k);
    if (!floor_.count("float32")) bad("floor has no float32 entry");
    for (const auto& [k, v] : c.at("spread").items()) spread_[k] = number(v, "spread." + k);
    rounds_ = c.value("rounds", 0);
    calibrated_ = true;
  }

  // key: the value's name in golden.calibration.spread ("loss/0",
  // "delta/fc.weight", "eval/output0", ...).
  double operator()(const std::string& key, ts::DType dt) const {
    if (given_) return *given_;
    if (!calibrated_) return kDefaultTol;
    auto f = floor_.find(ts::dtype_name(dt));
    double floor = f != floor_.end() ? f->second : floor_.at("float32");
    auto s = spread_.find(key);
    return std::max(floor, factor_ * (s != spread_.end() ? s->second : 0.0));
  }

  std::string describe() const {
    char line[512];
    if (given_) {
      std::snprintf(line, sizeof line, "tolerance %.1e for every value (--tol)", *given_);
    } else if (!calibrated_) {
      std::snprintf(line, sizeof line,
                    "tolerance %.1e for every value (the default: the artifact has no "
                    "calibration; export it again to calibrate)", kDefaultTol);
    } else {
      std::string floors;
      for (const auto& [k, v] : floor_) {
        char f[64];
        std::snprintf(f, sizeof f, "%s%.0e %s", floors.empty() ? "" : ", ", v, k.c_str());
        floors += f;
      }
      std::snprintf(line, sizeof line,
                    "tolerance per value: max(floor, %g x eager's own spread), calibrated at "
                    "export (%d round(s) of noise: one rounding on gradients, sqrt(fan-in) on "
                    "parameters); "
                    "floor %s; --tol overrides",
                    factor_, rounds_, floors.c_str());
    }
    return line;
  }

 private:
  std::optional<double> given_;
  bool calibrated_ = false;
  double factor_ = 0;
  int rounds_ = 0;
  std::map<std::string, double> floor_, spread_;
};

// Runs golden step 0 through train_step as exported (no passes, so every
// node keeps its name) and compares each node's outputs with the recorded
// eager values "trace/train_step/<value>". Returns the first diverging
// node's description, or "" when every recorded value matches.
std::string trace_step0(const ts::Artifact& a, double tol, int threads, bool quiet) {
  const std::string prefix = "trace/train_step/";
  bool any = false;
  for (const auto& [name, t] : a.tensors.tensors) any |= name.rfind(prefix, 0) == 0;
  if (!any)
    ts::fail(a.path + ": the artifact has no recorded trace (export it with --trace-values)");
  const ts::json& g = a.program.golden;
  const ts::Function& f = a.program.function("train_step");
  ts::Executor ex(f, threads, false);
  double lr64 = g.value("lr", 0.0);  // the lr port is float64 for float64 models
  float lr32 = static_cast<float>(lr64);
  int64_t seed = g.value("seed", int64_t(0)), offset = g.value("offset", int64_t(0));
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const ts::Port& p = f.inputs[i];
    void* data = nullptr;
    if (p.role == ts::Role::Input || p.role == ts::Role::Target) continue;  // the batch, below
    if (p.role == ts::Role::State) data = a.tensor("state/" + p.state).view.data;
    else if (p.role == ts::Role::Lr) data = p.type.dtype == ts::DType::F64 ? static_cast<void*>(&lr64) : &lr32;
    else if (p.role == ts::Role::RngSeed) data = &seed;
    else if (p.role == ts::Role::RngOffset) data = &offset;
    else ts::fail(a.path + ": train_step input '" + p.name + "' has role '" + ts::role_name(p.role) +
                  "', which a train_step does not take");
    ex.bind_input(static_cast<int>(i), data);
  }
  // golden_batch lists each role's tensors in inputs_of's port order.
  const ts::Artifact::Batch b0 = a.golden_batch(0);
  const std::vector<int> in_slots = f.inputs_of(ts::Role::Input);
  const std::vector<int> target_slots = f.inputs_of(ts::Role::Target);
  for (size_t k = 0; k < in_slots.size(); ++k) ex.bind_input(in_slots[k], b0.inputs[k].data);
  for (size_t k = 0; k < target_slots.size(); ++k)
    ex.bind_input(target_slots[k], b0.targets[k].data);
  std::string first;
  int compared = 0, mismatched = 0, unrecorded = 0;
  ex.set_observer([&](const ts::Node& n, const std::vector<const ts::Tensor*>& outs) {
    for (size_t k = 0; k < outs.size(); ++k) {
      if (n.outputs[k] < 0 || !outs[k]) continue;
      const std::string& v = f.value_names[n.outputs[k]];
      const ts::HostTensor* want = a.tensors.find(prefix + v);
      if (!want) {
        unrecorded += n.op != "trainstep.constant";  // the exporter's own constants are not traced
        continue;
      }
      ++compared;
      const std::string what = "node '" + n.name + "' (" + n.op + ") value '" + v + "'";
      bool ok;
      char line[256];
      if (outs[k]->type() != want->view.type()) {
        ok = false;
        std::snprintf(line, sizeof line, "is %s, recorded %s", outs[k]->type().str().c_str(),
                      want->view.type().str().c_str());
      } else {
        Diff d = compare(*outs[k], want->view, what);
        ok = within(d, tol);
        std::snprintf(line, sizeof line, "max_abs %.3e  of_scale %.3e", d.max_abs,
                      d.max_abs / std::max(d.scale, 1e-12));
      }
      if (ok) continue;
      ++mismatched;
      if (first.empty()) first = what + ": " + line;
      if (!quiet || mismatched == 1) std::printf("  trace %s: %s  MISMATCH\n", what.c_str(), line);
    }
  });
  ex.run();
  if (first.empty())
    std::printf("trace: all %d recorded node values match (step 0, unoptimised)\n", compared);
  else
    std::printf("trace: first divergence at %s (%d of %d values differ)\n", first.c_str(),
                mismatched, compared);
  if (unrecorded) std::printf("trace: %d node values were not recorded\n", unrecorded);
  return first;
}

}  // namespace

void add_verify(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("verify", "Replay the artifact's golden trace and compare");
  auto path = std::make_shared<std::string>();
  auto tol = std::make_shared<double>(kDefaultTol);
  auto sopts = std::make_shared<ts::SessionOptions>();
  auto quiet = std::make_shared<bool>(false);
  auto trace = std::make_shared<bool>(false);
  cmd->add_option("artifact", *path, "NAME.tstep")->required();
  CLI::Option* tol_opt =
      cmd->add_option("--tol", *tol,
                      "allowed max |got - golden| relative to the tensor's largest |golden|, for "
                      "every value (default: each value's tolerance calibrated at export)")
          ->check(finite_at_least(0));
  add_session_flags(cmd, *sopts);
  add_examples(cmd, {"trainstep verify mnist.tstep", "trainstep verify mnist.tstep --trace --no-fusion",
                    "trainstep verify mnist.tstep --device cuda"});
  cmd->add_flag("--quiet,-q", *quiet, "print only failures and the final line");
  cmd->add_flag("--trace", *trace,
                "first compare every node of step 0 with the recorded eager values "
                "(artifact exported with --trace-values)");
  cmd->callback([=, &action] {
    action = [=] {
      auto s = ts::Session::open(*path, *sopts);
      const ts::Artifact& a = s->artifact();
      note_if_unchecked(*path, a.tensors.checksummed);
      const ts::json& g = a.program.golden;
      if (!g.contains("steps")) ts::fail(*path + ": the artifact has no golden trace");
      const Tolerance tol_of(a, tol_opt->count() ? std::optional<double>(*tol) : std::nullopt);
      std::printf("verify: %s\n", tol_of.describe().c_str());
      if (sopts->device != ts::Device::Cpu)
        std::printf("verify: on %s\n", s->device_description().c_str());
      std::string failed;
      if (*trace) {
        std::string t = trace_step0(a, *tol, sopts->threads, *quiet);
        if (!t.empty()) failed = "trace: " + t;
      }
      const int64_t steps = g.at("steps").get<int64_t>();
      s->set_seed(g.value("seed", int64_t(0)));
      s->set_step(g.value("offset", int64_t(0)));
      s->set_lr(g.value("lr", s->lr()));

      // name: what the line says; key: the value's calibration key.
      auto check = [&](const std::string& name, const std::string& key, const ts::Tensor& got,
                       const ts::Tensor& want, const ts::Tensor* base = nullptr,
                       double min_scale = 0) {
        Diff d = compare(got, want, name, base, min_scale);
        const double t = tol_of(key, want.dtype);
        bool ok = within(d, t);
        if (!ok && failed.empty()) failed = name;
        if (!ok || !*quiet)
          std::printf("  %-44s max_abs %.3e  of_scale %.3e  tol %.1e  max_rel %.3e  %s\n",
                      name.c_str(), d.max_abs, d.max_abs / std::max(d.scale, 1e-12), t,
                      d.max_rel, ok ? "ok" : "MISMATCH");
      };
      // The first step's update of each state tensor, at the update's own
      // scale: a wrong optimizer rule shows here even where the trajectory
      // of several steps is too sensitive to check tightly. (Artifacts from
      // before calibration have no golden/after0.)
      auto check_update = [&](const std::string& tag) {
        for (const auto& n : s->state_names()) {
          const ts::HostTensor* want = a.tensors.find("golden/after0/" + n);
          if (want)
            check(tag + "update " + n, "delta/" + n, s->state(n), want->view,
                  &a.tensor("state/" + n).view);
        }
      };
      const ts::Tensor& losses = a.tensor("golden/loss").view;
      // Each loss at the scale of the whole series: a loss that falls near 0
      // is a difference of large terms (log-sum-exp minus the true logit),
      // exact only to their rounding.
      double loss_scale = 0;
      for (int64_t k = 0; k < losses.numel(); ++k)
        loss_scale = std::max(loss_scale, std::fabs(double(losses.as<float>()[k])));
      // The whole step (train_step); then, if the artifact has them, the
      // same steps split into grad_step + apply_grads, whose gradients of
      // step 0 are compared with eager's too.
      for (bool split : {false, true}) {
        if (split && !s->has_grad_functions()) break;
        const std::string tag = split ? "grad+apply " : "";
        if (split) {
          s->reset_state();
          s->set_step(g.value("offset", int64_t(0)));
        }
        for (int64_t k = 0; k < steps; ++k) {
          const ts::Artifact::Batch b = a.golden_batch(k);
          float loss = split ? s->grad_step(b.inputs, b.targets) : s->train_step(b.inputs, b.targets);
          ts::Tensor got{ts::DType::F32, {}, &loss};
          ts::Tensor want{ts::DType::F32, {}, losses.as<float>() + k};
          check(tag + "loss[step " + std::to_string(k) + "]", "loss/" + std::to_string(k), got,
                want, nullptr, loss_scale);
          if (split && k == 0)
            for (const auto& n : s->grad_names())
              check("grad " + n, "grad/" + n, s->grad(n), a.tensor("golden/grad/" + n).view);
          if (split) s->apply_grads();
          if (k == 0) check_update(tag);
        }
        for (const auto& n : s->state_names())
          check(tag + "state " + n, "state/" + n, s->state(n),
                a.tensor("golden/final/" + n).view);
      }
      const ts::Artifact::Batch b0 = a.golden_batch(0);
      s->eval_step(b0.inputs, b0.targets);
      for (int i = 0; i < s->eval_output_count(); ++i) {
        const std::string o = "output" + std::to_string(i);
        check("eval " + s->eval_output_name(i), "eval/" + o, s->eval_output(i),
              a.tensor("golden/eval/" + o).view);
      }
      // Per-sample losses at the training losses' scale too: a sample the
      // model already fits has a loss that is a difference of logits
      // exact only to their rounding.
      if (s->eval_loss_per_sample())
        check("eval sample_loss", "eval/sample_loss", s->eval_sample_loss(),
              a.tensor("golden/eval/sample_loss").view, nullptr, loss_scale);
      else
        check("eval batch_loss", "eval/batch_loss", s->eval_batch_loss(),
              a.tensor("golden/eval/batch_loss").view, nullptr, loss_scale);
      if (!failed.empty()) {
        std::printf("verify: FAILED %s\n", failed.c_str());
        return exit_code::kMismatch;
      }
      std::printf("verify: ok\n");
      return exit_code::kOk;
    };
  });
}

}  // namespace tscli

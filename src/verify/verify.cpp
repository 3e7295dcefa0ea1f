// ts::verify (trainstep/verify.h): the golden trace replayed through a
// session, each value compared as it comes and reported to the observer.
#include "trainstep/verify.h"

#include <algorithm>
#include <cmath>

#include "runtime/artifact.h"
#include "verify/diff.h"
#include "verify/tolerance.h"
#include "verify/trace.h"

namespace ts {

VerifyReport verify(const std::string& artifact_path, const VerifyOptions& o,
                    VerifyObserver* observer) {
  VerifyObserver none;
  VerifyObserver& ob = observer ? *observer : none;
  VerifyReport r;
  // grad_step and apply_step too (the artifact's, or cut from train_step),
  // replayed after train_step: what --accumulate and data-parallel run.
  SessionOptions so = o.session;
  so.grad_steps = true;
  auto s = Session::open(artifact_path, so);
  const Artifact& a = s->artifact();
  r.checksummed = a.tensors.checksummed;
  r.device = s->device_description();
  ob.on_open(r);
  const json& g = a.program.golden;
  if (!g.contains("steps")) fail(artifact_path + ": the artifact has no golden trace");
  const Tolerance tol_of(a, o.tol);
  r.tolerance = tol_of.describe();
  ob.on_start(r);
  if (o.trace) {
    r.trace = trace_step0(a, o.tol.value_or(Tolerance::kDefaultTol), o.session.threads,
                          [&](const TraceMismatch& m) { ob.on_trace_mismatch(m); });
    if (!r.trace->mismatches.empty()) r.failure = "trace: " + r.trace->mismatches[0].text;
    ob.on_trace(*r.trace);
  }
  const int64_t steps = g.at("steps").get<int64_t>();
  s->set_seed(g.value("seed", int64_t(0)));
  s->set_step(g.value("offset", int64_t(0)));
  s->set_lr(g.value("lr", s->lr()));

  // name: what the report says; key: the value's calibration key.
  auto check = [&](const std::string& name, const std::string& key, const Tensor& got,
                   const Tensor& want, const Tensor* base = nullptr, double min_scale = 0) {
    const Diff d = compare(got, want, name, base, min_scale);
    VerifyCheck c;
    c.name = name;
    c.key = key;
    c.max_abs = d.max_abs;
    c.scale = d.scale;
    c.of_scale = of_scale(d);
    c.max_rel = d.max_rel;
    c.tol = tol_of(key, want.dtype);
    c.nonfinite = d.nonfinite;
    c.ok = within(d, c.tol);
    if (!c.ok && r.failure.empty()) r.failure = name;
    r.checks.push_back(c);
    ob.on_check(r.checks.back());
  };
  // The first step's update of each state tensor, at the update's own
  // scale: a wrong optimizer rule shows here even where the trajectory of
  // several steps is too sensitive to check tightly. (Artifacts from
  // before calibration have no golden/after0.)
  auto check_update = [&](const std::string& tag) {
    for (const auto& n : s->state_names()) {
      const HostTensor* want = a.tensors.find("golden/after0/" + n);
      if (want)
        check(tag + "update " + n, "delta/" + n, s->state(n), want->view,
              &a.tensor("state/" + n).view);
    }
  };
  const Tensor& losses = a.tensor("golden/loss").view;
  // Each loss at the scale of the whole series: a loss that falls near 0
  // is a difference of large terms (log-sum-exp minus the true logit),
  // exact only to their rounding.
  double loss_scale = 0;
  for (int64_t k = 0; k < losses.numel(); ++k)
    loss_scale = std::max(loss_scale, std::fabs(double(losses.as<float>()[k])));
  // The whole step (train_step); then the same steps split into grad_step
  // + apply_grads, whose gradients of step 0 are compared with eager's
  // where the artifact recorded them (export --grads).
  for (bool split : {false, true}) {
    if (split && !s->has_grad_functions()) break;
    const std::string tag = split ? "grad+apply " : "";
    if (split) {
      s->reset_state();
      s->set_step(g.value("offset", int64_t(0)));
    }
    for (int64_t k = 0; k < steps; ++k) {
      const Artifact::Batch b = a.golden_batch(k);
      float loss = split ? s->grad_step(b.inputs, b.targets) : s->train_step(b.inputs, b.targets);
      Tensor got{DType::F32, {}, &loss};
      Tensor want{DType::F32, {}, losses.as<float>() + k};
      check(tag + "loss[step " + std::to_string(k) + "]", "loss/" + std::to_string(k), got, want,
            nullptr, loss_scale);
      if (split && k == 0)
        for (const auto& n : s->grad_names())
          if (const HostTensor* want = a.tensors.find("golden/grad/" + n))
            check("grad " + n, "grad/" + n, s->grad(n), want->view);
      if (split) s->apply_grads();
      if (k == 0) check_update(tag);
    }
    for (const auto& n : s->state_names())
      check(tag + "state " + n, "state/" + n, s->state(n), a.tensor("golden/final/" + n).view);
  }
  const Artifact::Batch b0 = a.golden_batch(0);
  s->eval_step(b0.inputs, b0.targets);
  for (int i = 0; i < s->eval_output_count(); ++i) {
    const std::string out = "output" + std::to_string(i);
    check("eval " + s->eval_output_name(i), "eval/" + out, s->eval_output(i),
          a.tensor("golden/eval/" + out).view);
  }
  // Per-sample losses at the training losses' scale too: a sample the
  // model already fits has a loss that is a difference of logits exact
  // only to their rounding.
  if (s->eval_loss_per_sample())
    check("eval sample_loss", "eval/sample_loss", s->eval_sample_loss(),
          a.tensor("golden/eval/sample_loss").view, nullptr, loss_scale);
  else
    check("eval batch_loss", "eval/batch_loss", s->eval_batch_loss(),
          a.tensor("golden/eval/batch_loss").view, nullptr, loss_scale);
  return r;
}

}  // namespace ts

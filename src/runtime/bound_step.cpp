#include "runtime/bound_step.h"

#include <cstdio>

#include "runtime/nonfinite.h"

namespace ts {

namespace {

// Tensor::type() copies the shape: compare in place, this runs every step.
bool has_type(const Tensor& t, const TensorType& want) {
  return t.dtype == want.dtype && t.shape == want.shape;
}

double element(const Tensor& t, int64_t i) {
  return t.dtype == DType::F64 ? t.as<double>()[i] : t.as<float>()[i];
}

std::string describe(const Tensor& t, int64_t i) {
  char b[64];
  std::snprintf(b, sizeof b, "%g", element(t, i));
  return std::string(b) + (t.shape.empty() ? "" : " at element " + std::to_string(i));
}

}  // namespace

const char* step_function_name(StepKind k) {
  switch (k) {
    case StepKind::Train: return "train_step";
    case StepKind::Eval: return "eval_step";
    case StepKind::Grad: return "grad_step";
    case StepKind::Apply: return "apply_step";
  }
  return "?";
}

BoundStep::BoundStep(StepKind kind, std::unique_ptr<Function> fn, MemoryPlan plan,
                     ComputeDevice& device, const Target& t, const StepBindings& b,
                     const std::string& artifact)
    : kind_(kind), fn_(std::move(fn)), host_memory_(t.host_memory) {
  const Function& f = *fn_;
  const std::string where = artifact + ": " + f.name;
  dev_ = device.compile(f, std::move(plan));
  // Every non-batch input, once: the state is the session's device state,
  // the rest is host memory the step reads at each run.
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& in = f.inputs[i];
    void* data = nullptr;
    switch (in.role) {
      case Role::State:
        data = b.device_state->at(in.state);
        break;
      case Role::Lr: data = b.lr; break;
      case Role::RngSeed: data = b.seed; break;
      case Role::RngOffset: data = b.rng_offset; break;
      case Role::Grad: {
        auto g = b.grads->find(in.state);
        if (g == b.grads->end())
          fail(where + " takes the gradient of '" + in.state + "', which grad_step does not give");
        data = g->second.view.data;
        break;
      }
      case Role::Input:
      case Role::Target: continue;  // bound per call (bind_batch)
      default:
        fail(where + ": input '" + in.name + "' has role '" + role_name(in.role) +
             "', which is an output role");
    }
    if (in.role == Role::State) dev_->bind_device_input(int(i), data);
    else dev_->bind_host_input(int(i), data);
  }
  inputs_ = f.inputs_of(Role::Input);
  outputs_ = f.outputs_of(Role::Output);
  targets_ = f.inputs_of(Role::Target);
  loss_ = f.find_output(Role::Loss);
  sample_loss_ = f.find_output(Role::SampleLoss);
  batch_loss_ = f.find_output(Role::BatchLoss);
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Port& out = f.outputs[i];
    if (out.role == Role::State) state_out_.emplace_back(int(i), &b.state->at(out.state).view);
    if (out.role == Role::Grad) grad_out_.emplace_back(int(i), &b.grads->at(out.state).view);
  }
  const bool batch = kind != StepKind::Apply;
  const bool needs_loss = kind == StepKind::Train || kind == StepKind::Grad;
  const bool model_out = kind == StepKind::Eval;
  if ((batch && targets_.empty()) || (needs_loss && loss_ < 0) ||
      (model_out && (outputs_.empty() || (sample_loss_ < 0) == (batch_loss_ < 0))))
    fail(where + "'s signature lacks a " +
         (batch && targets_.empty() ? "target" : needs_loss && loss_ < 0 ? "loss" : "model output and one per-sample or batch loss"));
}

Executor& BoundStep::executor() {
  Executor* ex = dev_->executor();
  if (!ex) fail(fn_->name + " runs on a device, not on the CPU's executor");
  return *ex;
}

const Executor& BoundStep::executor() const { return const_cast<BoundStep*>(this)->executor(); }

float BoundStep::loss_value() const { return static_cast<float>(element(output(loss_), 0)); }

void BoundStep::bind_batch(const std::vector<Tensor>& inputs, const Tensor* targets,
                           size_t n_targets) {
  const Function& f = *fn_;
  auto check = [&](const char* plural, const char* what, const std::vector<int>& slots,
                   const Tensor* given, size_t n) {
    if (n != slots.size())
      fail(f.name + ": expected " + std::to_string(slots.size()) + " " + plural + ", got " +
           std::to_string(n));
    for (size_t i = 0; i < n; ++i) {
      const Port& p = f.inputs[slots[i]];
      if (!has_type(given[i], p.type) || !given[i].data)
        fail(f.name + ": " + what + " " + std::to_string(i) + " (" + p.name + ") is " +
             given[i].type().str() + ", expected " + p.type.str() + " (the artifact's batch)");
    }
  };
  check("model input(s)", "input", inputs_, inputs.data(), inputs.size());
  check("target(s)", "target", targets_, targets, n_targets);
  auto bind = [&](const std::vector<int>& slots, const Tensor* given) {
    for (size_t i = 0; i < slots.size(); ++i) dev_->bind_host_input(slots[i], given[i].data);
  };
  bind(inputs_, inputs.data());
  bind(targets_, targets);
}

std::string BoundStep::find_nonfinite(bool with_loss, const Renewal& outs, const Program& p,
                                      int threads) const {
  if (with_loss && loss_ >= 0) {
    const Tensor& l = output(loss_);
    if (int64_t i = first_nonfinite(l, threads); i >= 0) return "the loss is " + describe(l, i);
  }
  const Function& fn = *fn_;
  if (!host_memory_) {  // checked on the device, where the new state is
    const int out = dev_->first_nonfinite_state();
    if (out < 0) return {};
    const Port& port = fn.outputs[out];
    const StateSpec* spec = p.find_state(port.state);
    return "the new value of '" + port.state + "' (" + (spec ? spec->kind : "state") +
           ") holds a NaN or inf (on the device)";
  }
  for (const auto& [out, dst] : outs) {
    const Port& port = fn.outputs[out];
    // A state the step passes through unchanged (a constant buffer such as
    // an attention mask of -inf) was not made non-finite by this step.
    const int in = fn.find_input(Role::State, port.state);
    if (port.role == Role::State && in >= 0 && fn.inputs[in].value == port.value) continue;
    const Tensor& t = dev_->output(out);
    const int64_t i = first_nonfinite(t, threads);
    if (i < 0) continue;
    if (port.role == Role::Grad) return "the gradient of '" + port.state + "' is " + describe(t, i);
    const StateSpec* spec = p.find_state(port.state);
    return "the new value of '" + port.state + "' (" + (spec ? spec->kind : "state") + ") is " +
           describe(t, i);
  }
  return {};
}

}  // namespace ts

// One step function of an artifact, compiled and bound to a session's
// tensors: its optimised Function, the device step that runs it (the CPU's
// or another device's), and its ports resolved by role once. A Session holds one BoundStep per function kind the
// artifact has; a new kind (an all-reduce variant, a GPU variant) is one
// more entry, not a new set of fields.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"
#include "passes/target.h"
#include "runtime/device.h"
#include "runtime/executor.h"

namespace ts {

enum class StepKind : int { Train, Eval, Grad, Apply };
constexpr StepKind kStepKinds[] = {StepKind::Train, StepKind::Eval, StepKind::Grad,
                                   StepKind::Apply};
// The artifact's function name: "train_step", "eval_step", ...
const char* step_function_name(StepKind k);

// The session tensors a step's non-batch inputs read. Pointers stay valid
// for the session's life (its maps do not rehash on lookup).
struct StepBindings {
  std::map<std::string, HostTensor>* state = nullptr;  // the host copy, by name
  std::map<std::string, HostTensor>* grads = nullptr;  // empty without grad functions
  void* lr = nullptr;
  void* seed = nullptr;
  void* rng_offset = nullptr;  // train/grad: the global step; eval: the eval offset
  // Where the state inputs read, by name: the device's memory (on the CPU,
  // the host copy itself).
  const std::map<std::string, void*>* device_state = nullptr;
};

class BoundStep {
 public:
  // Compiles `fn` (already optimised for t) over `plan` on `device` and binds
  // every non-batch input. Fails naming `artifact` when the signature lacks
  // a port this kind needs.
  BoundStep(StepKind kind, std::unique_ptr<Function> fn, MemoryPlan plan, ComputeDevice& device,
            const Target& t, const StepBindings& b, const std::string& artifact);

  StepKind kind() const { return kind_; }
  const Function& function() const { return *fn_; }
  // The CPU executor; a step on another device has none (fails naming it).
  Executor& executor();
  const Executor& executor() const;
  const DeviceStep& device_step() const { return *dev_; }
  // Memory the step holds on its device (on the CPU, the arena).
  size_t memory_bytes() const { return dev_->device_bytes(); }
  // Per-node times (DeviceStep profiling).
  void set_profiling(bool on) { dev_->set_profiling(on); }
  const std::vector<NodeTime>& profile() const { return dev_->profile(); }

  // Checks the batch against the model-input and target ports (the error
  // names the port) and binds it: `targets` points at n_targets tensors,
  // one per target port by index.
  void bind_batch(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n_targets);
  void run() { dev_->run(); }
  // New state not written in place goes back into the state (DeviceStep).
  void commit_state() { dev_->commit_state(); }
  // An output in host memory: any output where the device's memory is the
  // host's, else the non-state ones (new state stays on the device; see
  // find_nonfinite for its check).
  const Tensor& output(int slot) const { return dev_->output(slot); }

  // Ports by role (slots are indices into the function's inputs/outputs).
  const std::vector<int>& inputs() const { return inputs_; }  // model inputs, by index
  const std::vector<int>& targets() const { return targets_; }  // target tensors, by index
  int loss() const { return loss_; }                          // -1: none (apply, eval)
  // The loss after run() (float32 or float64, 0-d) as the float the
  // session's steps return.
  float loss_value() const;
  const std::vector<int>& outputs() const { return outputs_; }  // model outputs, by index
  int sample_loss() const { return sample_loss_; }  // -1: none (batch_loss instead)
  int batch_loss() const { return batch_loss_; }
  // Output slot -> the session tensor it renews: new state, and gradients.
  using Renewal = std::vector<std::pair<int, Tensor*>>;
  const Renewal& state_out() const { return state_out_; }
  const Renewal& grad_out() const { return grad_out_; }

  // "" when the loss (if `with_loss`) and the outputs `outs` are all
  // finite, else which one is not. Allocates nothing when all are.
  std::string find_nonfinite(bool with_loss, const Renewal& outs, const Program& p,
                             int threads) const;

 private:
  StepKind kind_;
  std::unique_ptr<Function> fn_;
  std::unique_ptr<DeviceStep> dev_;
  bool host_memory_;  // outputs, new state included, readable in host memory
  std::vector<int> inputs_, targets_, outputs_;
  int loss_ = -1, sample_loss_ = -1, batch_loss_ = -1;
  Renewal state_out_, grad_out_;
};

}  // namespace ts

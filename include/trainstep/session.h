// The public C++ API: load an artifact, create a session, run training and
// eval steps, read and write state by name, save and load checkpoints.
//
// Thread-safety: one Session must not be used by two threads at once (its
// calls mutate state and bound buffers); use one Session per thread.
// Separate sessions share nothing mutable, so sessions on different threads
// may run concurrently, and each gives the same bits as it would alone
// (tests/cpp/test_isolation.cpp). The process-wide pieces are read-only or
// per thread: the op registry (built once), oneDNN's engine (shared, its
// primitive cache is thread-safe) and stream (one per thread), and the
// OpenMP thread count, which is a per-thread setting that a session with
// `threads > 0` sets on the calling thread before each step (`threads = 0`
// uses the calling thread's OpenMP default). Session::open may be called
// from several threads at once.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainstep/checkpoint.h"
#include "trainstep/collective.h"
#include "trainstep/error.h"
#include "trainstep/options.h"
#include "trainstep/tensor.h"

namespace ts {

struct Artifact;
struct SafeTensors;
struct Program;
struct Target;
class Executor;
class BoundStep;
class ComputeDevice;
class StateStore;
class GradAccumulator;
class NonFinitePolicy;
struct ShardPlan;
struct NodeTime;
enum class StepKind : int;

// What a session reports after each optimizer step (Session::on_step).
struct StepMetrics {
  int64_t step = 0;        // global steps taken, this one included
  double lr = 0;           // the LR the step used
  double loss = 0;         // the step's loss (grad_step + apply_grads: the last micro-batch's)
  double seconds = 0;      // wall time of the step's compute (all its micro-batches)
  bool skipped = false;    // dropped as non-finite (NonFinite::Skip)
};

class Session {
 public:
  // load → verify → compile → bind. Throws ts::Error naming the file.
  static std::unique_ptr<Session> open(const std::string& artifact_path, SessionOptions o = {});
  // The same from an artifact's bytes already in memory (embedded in the
  // program, downloaded, ...), with the same checks; `name` stands for the
  // file in error messages.
  static std::unique_ptr<Session> open_memory(const std::string& bytes, const std::string& name,
                                              SessionOptions o = {});
  Session(std::shared_ptr<const Artifact> a, SessionOptions o);
  ~Session();

  const Program& program() const;
  const Artifact& artifact() const { return *artifact_; }
  int64_t batch_size() const;
  // What train_step and eval_step take: the model inputs' types, by input
  // index, and the target tensors' (the artifact's example batch). A
  // structured target (a dict of labels and boxes) is several tensors, in
  // the order of its leaves; target_type() is the first.
  std::vector<TensorType> input_types() const;
  std::vector<TensorType> target_types() const;
  TensorType target_type() const;

  // State: parameters, buffers and optimizer state, by name: all of it, or
  // with SessionOptions::shard_optimizer, what this rank holds (the
  // parameters, the buffers and its share of the optimizer state; another
  // rank's share fails, naming that rank).
  std::vector<std::string> state_names() const;
  const Tensor& state(const std::string& name) const;
  void set_state(const std::string& name, const Tensor& value);  // copies; checks the type
  // Bytes of state this session holds (all of it, or this rank's share).
  size_t state_bytes() const;
  bool shards_optimizer() const;
  // How this rank's share was dealt, for the run's log ("" unsharded).
  std::string shard_description() const;
  void reset_state();  // back to the artifact's initial state

  // Runtime inputs of the step: learning rate, RNG seed, global step (the
  // RNG offset). train_step advances step() by one.
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  void set_seed(int64_t s) { seed_ = s; }
  int64_t seed() const { return seed_; }
  void set_step(int64_t s) { step_ = s; }
  int64_t step() const { return step_; }

  // One training step on a batch; returns the loss. Inputs must match the
  // artifact's example batch exactly (dtype and shape). See NonFinite for
  // what happens when a result is not finite.
  // The one-tensor target form is for artifacts with a single target.
  float train_step(const std::vector<Tensor>& inputs, const Tensor& target);
  float train_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets);
  // NonFinite::Skip: optimizer steps whose update was dropped (kept in
  // checkpoints), and whether the last train_step / apply_grads was one.
  int64_t skipped_steps() const;
  bool last_step_skipped() const;
  // One eval step (model.eval()); read the results below. A model that
  // samples in eval mode draws from the eval stream at eval_offset(), which
  // each eval_step advances by one; set it to 0 before an evaluation pass
  // for the same draws every pass.
  void eval_step(const std::vector<Tensor>& inputs, const Tensor& target);
  void eval_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets);
  void set_eval_offset(int64_t o) { eval_offset_ = o; }
  int64_t eval_offset() const { return eval_offset_; }
  const Tensor& eval_output() const;       // the model's (first) output tensor
  // Every output tensor of the model, in order, with its path in the
  // model's output structure: "output" for a lone tensor, "output/0",
  // "output/mu", ... for tuples, dicts, namedtuples and dataclasses.
  int eval_output_count() const;
  const std::string& eval_output_name(int i) const;
  const Tensor& eval_output(int i) const;
  // The eval loss: per sample ([batch]) where the loss splits per sample,
  // else the batch's (0-d: a loss the model returns, a target flattened
  // over the batch). eval_sample_loss fails on the second kind.
  bool eval_loss_per_sample() const;
  const Tensor& eval_sample_loss() const;
  const Tensor& eval_batch_loss() const;

  // Gradient accumulation and gradients by name need grad_step/apply_step: a
  // session opened with SessionOptions::grad_steps cuts them from train_step;
  // an artifact exported with --grads brings its own. Without, these fail.
  bool has_grad_functions() const;
  // Fails, naming `what` and how to get them, unless has_grad_functions().
  void require_grad_functions(const char* what) const;
  // Forward and backward on one batch, no update: adds the gradients into
  // the session's accumulators and updates buffers (BatchNorm stats) as
  // train_step does; returns the loss. Micro-batch k after the last apply
  // draws its dropout masks at RNG offset step() * accumulation() + k.
  // The loss, new buffers and gradients are checked as NonFinite says; in
  // Skip mode a non-finite micro-batch adds nothing and marks the pending
  // optimizer step to be skipped by apply_grads.
  float grad_step(const std::vector<Tensor>& inputs, const Tensor& target);
  float grad_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets);
  // Averages the accumulated gradients over the grad_steps since the last
  // apply (mean-reduced losses: the gradient of their concatenated batch),
  // clips them if the artifact was exported with clipping, runs the
  // optimizer update and advances step(). Fails if no grad_step ran.
  void apply_grads();
  int64_t pending_grad_steps() const { return micro_; }
  // Micro-batches per optimizer step: only sets the RNG offsets above.
  void set_accumulation(int64_t n);
  int64_t accumulation() const { return accumulation_; }
  // Names of the parameters that have gradients (the ones the step updates).
  std::vector<std::string> grad_names() const;
  // The gradient of parameter `name` that the last apply_grads used
  // (averaged, before clipping); between grad_steps, their running sum.
  const Tensor& grad(const std::string& name) const;

  // Called after every optimizer step (train_step, apply_grads) with its
  // metrics, on the calling thread; a progress bar or metrics log hangs
  // here. Empty (the default): nothing is called. The call allocates
  // nothing itself.
  void on_step(std::function<void(const StepMetrics&)> fn) { on_step_ = std::move(fn); }

  // The data-parallel group (SessionOptions::collective); rank 0 of 1 without.
  Collective* collective() const { return opts_.collective.get(); }
  int rank() const { return opts_.collective ? opts_.collective->rank() : 0; }
  int world_size() const { return opts_.collective ? opts_.collective->size() : 1; }
  // Every rank takes rank `root`'s state, step, seed and LR (as DDP does at
  // construction), so the replicas start equal whatever each loaded. A
  // sharded optimizer's state stays each holder's own.
  void broadcast_state(int root = 0);
  // Throws ts::Error unless every rank holds the same parameters and
  // optimizer state, bit for bit (a hash compared over the ranks; ts::train
  // checks after every epoch). Buffers such as BatchNorm's running
  // statistics are each rank's own and not compared. Replicas apply the same averaged update, so they never differ
  // unless something is wrong.
  void check_state_replicated() const;

  // Where the steps run (SessionOptions::device), e.g. "cpu" or
  // "cuda:0 (NVIDIA H200)"; and, on a device, how train_step is launched.
  std::string device_description() const;
  std::string train_step_description() const;

  // Per-node timing of train_step (see Executor::set_profiling; on a
  // device, kernel by kernel with device events instead of the graph).
  void set_profiling(bool on);
  const std::vector<NodeTime>& train_profile() const;
  const Executor& train_executor() const;
  // Bytes the session holds for state, gradient accumulators and the steps'
  // arenas (what SessionOptions::max_memory bounds).
  size_t memory_bytes() const;
  // The model's name, as the artifact records it, and whether the artifact
  // file carries checksums (files written before them do not; the CLI
  // notes it).
  const std::string& model_name() const;
  bool artifact_checksummed() const;

  // Checkpoint: state under PyTorch state_dict names plus `optim/…`, and
  // metadata (trainstep/checkpoint.h): the session's step, seed, LR and
  // skipped steps, where a training run stands (`run`, as ts::train writes
  // it), and the caller's own `extra` keys. Written atomically (temp file,
  // fsync, rename). A session that shards the optimizer (shards_optimizer())
  // writes the whole state too: every rank must call it (the others send
  // rank 0 their optimizer state), and only rank 0 writes the file.
  void save_checkpoint(const std::string& path,
                       const std::optional<RunPosition>& run = std::nullopt,
                       const std::map<std::string, std::string>& extra = {}) const;
  // Restores state, step, seed and LR, and returns the checkpoint's
  // metadata. Everything is checked first: a bad or mismatched file throws
  // ts::Error naming it and leaves the session as it was.
  CheckpointMeta load_checkpoint(const std::string& path);
  // The same from a file already read (and its checksums checked).
  CheckpointMeta load_checkpoint(const std::string& path, SafeTensors ck);

 private:
  // The steps above on `n` target tensors (no vector: nothing is
  // allocated per step).
  float train_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n);
  float grad_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n);
  void eval_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n);
  BoundStep* find_step(StepKind k) const;  // null when the artifact has none
  BoundStep& step(StepKind k) const;       // the train or eval step (always there)
  // After a step ran: its new state checked (as on_nonfinite says) and
  // kept, or the step dropped; the step counter advances either way.
  void keep_state(BoundStep& b, bool with_loss);
  // Fails, naming the holder, for another rank's share of the optimizer state.
  void check_held(const std::string& name) const;
  // Writes lr_ into the LR input, in its dtype (float32 or float64).
  void set_lr_input();
  void report_step(double seconds, double loss);

  // The parts a session is made of (src/runtime/): it owns them, they work.
  std::shared_ptr<const Artifact> artifact_;
  SessionOptions opts_;
  const Target* target_;                       // what the device can do
  std::unique_ptr<ComputeDevice> device_;      // the CPU, or a device
  std::unique_ptr<StateStore> state_;          // parameters, buffers, optimizer state
  std::unique_ptr<GradAccumulator> grads_;     // grad_step's sums (empty without)
  std::unique_ptr<NonFinitePolicy> nonfinite_;
  std::unique_ptr<ShardPlan> shard_;           // who holds what (shard_optimizer), or null
  std::map<StepKind, std::unique_ptr<BoundStep>> steps_;
  HostTensor lr_t_, seed_t_, step_t_, eval_offset_t_;  // the steps' scalar inputs
  double lr_ = 0;
  int64_t seed_ = 0, step_ = 0, eval_offset_ = 0;
  int64_t micro_ = 0, accumulation_ = 1;
  std::function<void(const StepMetrics&)> on_step_;
  double micro_seconds_ = 0;  // compute time of the grad_steps since the last apply
  float last_loss_ = 0;
};

}  // namespace ts

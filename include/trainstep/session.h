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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "passes/pipeline.h"
#include "trainstep/tensor.h"

namespace ts {

struct Artifact;
struct Program;
struct StateSpec;
struct Function;
class Executor;

// What train_step does when the loss or a new state tensor is NaN or inf.
// Checked after every step: the loss, then each new state tensor (params,
// buffers, optimizer state) in the step's output order. Gradients are not
// outputs of the step; a non-finite gradient shows up in the optimizer
// state or the parameters it updates.
enum class NonFinite {
  Ignore,  // no check
  Stop,    // throw ts::Error naming the step and the first non-finite tensor
  // Keep the state from before the step (as AMP's GradScaler skips an
  // update), count it in skipped_steps(), and go on; the step counter still
  // advances (the batch is consumed). Cost: new state cannot be written in
  // place over the old (no donation), so the step's arena grows by the
  // state's size and every step copies the new state back (a memcpy of the
  // state), as with --no-inplace.
  Skip,
};

struct SessionOptions {
  int threads = 0;  // 0: the calling thread's OpenMP default
  CompileOptions compile;
  // Bound on the memory the session allocates for state and the steps'
  // arenas, in bytes (0: the machine's physical memory). Checked before
  // anything is allocated; an error names the size needed.
  size_t max_memory = 0;
  NonFinite on_nonfinite = NonFinite::Stop;
};

// "512M", "2G", "1.5GiB", "1073741824" -> bytes (K/M/G/T are powers of 1024).
size_t parse_memory_size(const std::string& text);

class Session {
 public:
  // load → verify → compile → bind. Throws ts::Error naming the file.
  static std::unique_ptr<Session> open(const std::string& artifact_path, SessionOptions o = {});
  Session(std::shared_ptr<const Artifact> a, SessionOptions o);
  ~Session();

  const Program& program() const;
  const Artifact& artifact() const { return *artifact_; }
  int64_t batch_size() const;

  // State: parameters, buffers and optimizer state, by name.
  std::vector<std::string> state_names() const;
  const Tensor& state(const std::string& name) const;
  void set_state(const std::string& name, const Tensor& value);  // copies; checks the type
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
  float train_step(const std::vector<Tensor>& inputs, const Tensor& target);
  // NonFinite::Skip: steps whose update was dropped (kept in checkpoints),
  // and whether the last train_step was one.
  int64_t skipped_steps() const { return skipped_; }
  bool last_step_skipped() const { return last_skipped_; }
  // One eval step (model.eval()); read the results below.
  void eval_step(const std::vector<Tensor>& inputs, const Tensor& target);
  const Tensor& eval_output() const;       // the model's output
  const Tensor& eval_sample_loss() const;  // loss of each sample, [batch]

  // Per-node timing of train_step (see Executor::set_profiling).
  void set_profiling(bool on);
  const Executor& train_executor() const { return *train_; }
  // Bytes the session holds for state and the two steps' arenas (what
  // SessionOptions::max_memory bounds).
  size_t memory_bytes() const;

  // Checkpoint: state under PyTorch state_dict names plus `optim/…`, and
  // metadata (step, seed, lr, skipped steps, plus `extra`). Written
  // atomically (temp file, fsync, rename).
  void save_checkpoint(const std::string& path,
                       const std::map<std::string, std::string>& extra = {}) const;
  // Restores state, step, seed and lr; returns the checkpoint's metadata.
  std::map<std::string, std::string> load_checkpoint(const std::string& path);

 private:
  void check_batch(const char* fn, const std::vector<Tensor>& inputs, const Tensor& target,
                   const std::vector<int>& slots, int target_slot) const;

  void copy_out_state();
  // "" if the loss and every new state tensor are finite, else what is not.
  std::string find_nonfinite() const;

  std::shared_ptr<const Artifact> artifact_;
  SessionOptions opts_;
  std::vector<std::string> names_;
  std::map<std::string, HostTensor> state_;
  std::unique_ptr<Function> train_fn_, eval_fn_;  // optimised copies the executors run
  std::unique_ptr<Executor> train_, eval_;
  HostTensor lr_t_, seed_t_, step_t_;
  double lr_ = 0;
  int64_t seed_ = 0, step_ = 0, skipped_ = 0;
  bool last_skipped_ = false;
  // Signature slots, resolved once.
  std::vector<int> train_inputs_, eval_inputs_;
  int train_target_ = -1, eval_target_ = -1, train_loss_ = -1;
  int eval_output_ = -1, eval_sample_loss_ = -1;
  std::vector<std::pair<int, Tensor*>> train_state_out_;  // output index -> state tensor
  std::vector<const StateSpec*> train_state_spec_;       // same order, for messages
  size_t state_bytes_ = 0;
  Buffer staging_;  // see copy_out_state
};

}  // namespace ts

// Session owns the parts of a running artifact and forwards to them:
// compile_steps (passes, plans, the memory budget), the device and its
// StateStore, the GradAccumulator, NonFinitePolicy, and the replica calls of
// src/dist/replicas.h. What is left here is the order of a step.
#include "trainstep/session.h"

#include <chrono>

#include "dist/replicas.h"
#include "io/safetensors.h"
#include "passes/shard_optimizer.h"
#include "runtime/bound_step.h"
#include "runtime/checkpoint_file.h"
#include "runtime/compile_steps.h"
#include "runtime/grad_accumulator.h"
#include "runtime/nonfinite_policy.h"
#include "runtime/state_store.h"
#include "trainstep/cpu.h"

namespace ts {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::unique_ptr<Session> Session::open(const std::string& path, SessionOptions o) {
  auto a = std::make_shared<Artifact>(load_artifact(path));
  return std::make_unique<Session>(std::move(a), o);
}

std::unique_ptr<Session> Session::open_memory(const std::string& bytes, const std::string& name,
                                              SessionOptions o) {
  auto a = std::make_shared<Artifact>(load_artifact(name, parse_safetensors(bytes, name)));
  return std::make_unique<Session>(std::move(a), o);
}

Session::Session(std::shared_ptr<const Artifact> a, SessionOptions o)
    : artifact_(std::move(a)), opts_(o), target_(&target_of(o.device)) {
  check_cpu_baseline();
  apply_cpu_isa_env();  // before the kernels, and oneDNN, choose their level
  const Program& p = artifact_->program;
  const std::string& path = artifact_->path;
  check_supported(o, *target_, path);  // before any work
  if (o.collective && o.collective->size() > 1)
    check_same_model(*o.collective, p, p.batch_size, path);
  CompiledSteps compiled = compile_steps(*artifact_, o, *target_);

  device_ = open_device(o.device, o.threads, o.collective.get());
  if (compiled.shard) shard_ = std::make_unique<ShardPlan>(std::move(*compiled.shard));
  const int r = rank();
  state_ = std::make_unique<StateStore>(
      p, *device_, target_->host_memory,
      [&](const std::string& s) { return !shard_ || shard_->holds(s, r); });
  grads_ = std::make_unique<GradAccumulator>(compiled.grad_step);
  nonfinite_ = std::make_unique<NonFinitePolicy>(o.on_nonfinite);
  reset_state();
  lr_ = p.optimizer.value("lr", 0.0);
  lr_t_ = HostTensor(compiled.lr_dtype, {});
  seed_t_ = HostTensor(DType::I64, {});
  step_t_ = HostTensor(DType::I64, {});
  eval_offset_t_ = HostTensor(DType::I64, {});

  StepBindings b{&state_->host(), &grads_->tensors(), lr_t_.view.data, seed_t_.view.data,
                 step_t_.view.data, &state_->device()};
  for (CompiledStep& c : compiled.steps) {
    StepBindings bi = b;
    // Eval draws from its own stream position (see eval_step).
    if (c.kind == StepKind::Eval) bi.rng_offset = eval_offset_t_.view.data;
    steps_[c.kind] = std::make_unique<BoundStep>(c.kind, std::move(c.fn), std::move(c.plan),
                                                 *device_, *target_, bi, path);
  }
  if (const BoundStep* g = find_step(StepKind::Grad))
    if (g->inputs().size() != step(StepKind::Train).inputs().size())
      fail(path + ": grad_step takes " + std::to_string(g->inputs().size()) +
           " model input(s), train_step " + std::to_string(step(StepKind::Train).inputs().size()));
}

BoundStep* Session::find_step(StepKind k) const {
  auto it = steps_.find(k);
  return it == steps_.end() ? nullptr : it->second.get();
}

BoundStep& Session::step(StepKind k) const {
  BoundStep* b = find_step(k);
  if (!b) fail(artifact_->path + ": the artifact has no " + step_function_name(k));
  return *b;
}

Session::~Session() = default;

const Program& Session::program() const { return artifact_->program; }
int64_t Session::batch_size() const { return artifact_->program.batch_size; }
std::vector<std::string> Session::state_names() const { return state_->names(); }

std::vector<TensorType> Session::input_types() const {
  const BoundStep& t = step(StepKind::Train);
  std::vector<TensorType> r;
  for (int slot : t.inputs()) r.push_back(t.function().inputs[slot].type);
  return r;
}

TensorType Session::target_type() const { return target_types().at(0); }

std::vector<TensorType> Session::target_types() const {
  const BoundStep& t = step(StepKind::Train);
  std::vector<TensorType> r;
  for (int slot : t.targets()) r.push_back(t.function().inputs[slot].type);
  return r;
}

void Session::check_held(const std::string& name) const {
  if (!shard_ || state_->has(name)) return;
  auto it = shard_->state_owner.find(name);
  if (it != shard_->state_owner.end())
    fail("state '" + name + "' is optimizer state that rank " + std::to_string(it->second) +
         " holds (--shard-optimizer); this is rank " + std::to_string(rank()));
}

const Tensor& Session::state(const std::string& name) const {
  check_held(name);
  return state_->get(name);
}
void Session::set_state(const std::string& name, const Tensor& v) {
  check_held(name);
  state_->set(name, v);
}

bool Session::shards_optimizer() const { return shard_ != nullptr; }

std::string Session::shard_description() const {
  if (!shard_) return "";
  size_t mine = 0;
  for (const auto& [param, rank] : shard_->param_owner) mine += rank == this->rank();
  std::string r = "optimizer sharded (ZeRO-1): rank " + std::to_string(rank()) + " updates " +
                  std::to_string(mine) + " of " + std::to_string(shard_->param_owner.size()) +
                  " parameters; gradients ";
  return r + (shard_->reads_all_grads.empty()
                  ? "reduce-scattered, parameters all-gathered"
                  : "all-reduced, as " + shard_->reads_all_grads + "; parameters all-gathered");
}

size_t Session::state_bytes() const { return state_->bytes(); }

void Session::reset_state() {
  for (const auto& n : state_->names()) set_state(n, artifact_->tensor("state/" + n).view);
}

std::string Session::device_description() const { return device_->name(); }

std::string Session::train_step_description() const {
  return step(StepKind::Train).device_step().describe();
}

int64_t Session::skipped_steps() const { return nonfinite_->skipped(); }
bool Session::last_step_skipped() const { return nonfinite_->last_skipped(); }

float Session::train_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  return train_on(inputs, &target, 1);
}

float Session::train_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  return train_on(inputs, targets.data(), targets.size());
}

void Session::keep_state(BoundStep& b, bool with_loss) {
  // "": no allocation
  std::string bad = nonfinite_->checks()
      ? b.find_nonfinite(with_loss, b.state_out(), program(), opts_.threads)
      : std::string();
  // Sharded, each rank checks only its share of the optimizer state; every
  // rank skips a step, or none, so the replicas stay equal.
  if (shard_ && opts_.on_nonfinite == NonFinite::Skip) {
    const int64_t at = collective()->max(bad.empty() ? -1 : rank(), "the skipped-step agreement");
    if (bad.empty() && at >= 0)
      bad = "rank " + std::to_string(at) + "'s share of the optimizer state is not finite";
  }
  if (bad.empty()) b.commit_state();
  else nonfinite_->step_failed(bad, step_);  // throws in Stop mode
  ++step_;  // the batch is consumed either way
}

float Session::train_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n) {
  BoundStep& t = step(StepKind::Train);
  t.bind_batch(inputs, targets, n);
  set_lr_input();
  *seed_t_.view.as<int64_t>() = rank_seed(seed_, rank());
  *step_t_.view.as<int64_t>() = step_;
  const auto t0 = std::chrono::steady_clock::now();
  t.run();
  const double seconds = seconds_since(t0);
  state_->renewed();  // the step wrote the device state, whatever comes next
  micro_ = 0;  // a whole step drops gradients accumulated but not applied
  nonfinite_->set_pending(false);
  nonfinite_->start_step();
  const float loss = t.loss_value();
  keep_state(t, true);
  report_step(seconds, loss);
  return loss;
}

void Session::report_step(double seconds, double loss) {
  if (!on_step_) return;
  StepMetrics m;
  m.step = step_;
  m.lr = lr_;
  m.loss = loss;
  m.seconds = seconds;
  m.skipped = nonfinite_->last_skipped();
  on_step_(m);
}

void Session::set_lr_input() {
  if (lr_t_.view.dtype == DType::F64)
    *lr_t_.view.as<double>() = lr_;
  else
    *lr_t_.view.as<float>() = static_cast<float>(lr_);
}

bool Session::has_grad_functions() const { return find_step(StepKind::Grad) != nullptr; }

void Session::require_grad_functions(const char* what) const {
  if (has_grad_functions()) return;
  if (!target_->grad_steps)
    fail(artifact_->path + ": " + runs_only_on(what, &Target::grad_steps));
  if (opts_.grad_steps)
    fail(artifact_->path + ": " + what +
         " needs grad_step and apply_step, and the artifact names no gradients in train_step "
         "to cut them from (it predates trainstep doing so): export it again, or export it "
         "with --grads");
  fail(artifact_->path + ": " + what +
       " needs grad_step and apply_step: open the session with SessionOptions::grad_steps "
       "(train and bench --accumulate do), or export the artifact with --grads");
}

float Session::grad_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  return grad_on(inputs, &target, 1);
}

float Session::grad_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  return grad_on(inputs, targets.data(), targets.size());
}

float Session::grad_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n) {
  require_grad_functions("grad_step (gradient accumulation)");
  BoundStep* g = find_step(StepKind::Grad);
  g->bind_batch(inputs, targets, n);
  *seed_t_.view.as<int64_t>() = rank_seed(seed_, rank());
  *step_t_.view.as<int64_t>() = step_ * accumulation_ + micro_;
  const auto t0 = std::chrono::steady_clock::now();
  g->run();
  const double seconds = seconds_since(t0);
  const float loss = g->loss_value();
  if (micro_ == 0) {
    nonfinite_->set_pending(false);
    micro_seconds_ = 0;
  }
  micro_seconds_ += seconds;
  last_loss_ = loss;
  if (nonfinite_->checks()) {
    std::string bad = g->find_nonfinite(true, g->state_out(), program(), opts_.threads);
    if (bad.empty()) bad = g->find_nonfinite(false, g->grad_out(), program(), opts_.threads);
    if (!bad.empty()) {
      // Skip: this micro-batch adds nothing; apply_grads drops the step.
      nonfinite_->micro_failed(bad, step_, micro_);
      ++micro_;
      return loss;
    }
  }
  g->commit_state();
  grads_->add(*g, micro_ == 0);
  ++micro_;
  return loss;
}

void Session::apply_grads() {
  require_grad_functions("apply_grads (gradient accumulation)");
  BoundStep* ap = find_step(StepKind::Apply);
  if (micro_ == 0) fail("apply_grads: no grad_step since the last update");
  nonfinite_->start_step();
  // Every rank skips, or none: their updates must stay equal.
  if (world_size() > 1)
    nonfinite_->set_pending(
        collective()->max(nonfinite_->pending() ? 1 : 0, "the skipped-step agreement") != 0);
  if (nonfinite_->pending()) {  // a micro-batch was not finite (Skip mode): no update
    micro_ = 0;
    nonfinite_->set_pending(false);
    nonfinite_->step_failed("", step_);
    ++step_;
    report_step(micro_seconds_, last_loss_);
    return;
  }
  // The mean over every micro-batch of every rank.
  const int ranks = world_size();
  if (ranks > 1) grads_->all_reduce(*opts_.collective);
  if (micro_ > 1 || ranks > 1) grads_->divide(static_cast<double>(micro_) * ranks);
  set_lr_input();
  const auto t0 = std::chrono::steady_clock::now();
  ap->run();
  const double seconds = micro_seconds_ + seconds_since(t0);
  micro_ = 0;
  keep_state(*ap, false);
  report_step(seconds, last_loss_);
}

void Session::broadcast_state(int root) {
  Collective* c = collective();
  if (!c || c->size() == 1) return;
  // A sharded optimizer's state is its holder's alone (each rank read the
  // same checkpoint or artifact).
  std::vector<Tensor*> tensors;
  for (const auto& n : state_->names())
    if (!shard_ || !shard_->state_owner.count(n)) tensors.push_back(&state_->host().at(n).view);
  ReplicaCounters k{step_, seed_, nonfinite_->skipped(), lr_};
  broadcast_replica(*c, root, tensors, k);
  step_ = k.step;
  seed_ = k.seed;
  nonfinite_->set_skipped(k.skipped);
  lr_ = k.lr;
}

void Session::check_state_replicated() const {
  Collective* c = collective();
  if (!c || c->size() == 1) return;
  // Buffers (BatchNorm's running statistics) are each rank's own.
  std::vector<const Tensor*> compared;
  for (const auto& s : program().state)
    if (s.kind != "buffer" && (!shard_ || !shard_->state_owner.count(s.name)))
      compared.push_back(&state_->get(s.name));
  check_replicated(*c, compared, step_);
}

void Session::set_accumulation(int64_t n) {
  if (n < 1) fail("gradient accumulation must be at least 1 micro-batch, got " + std::to_string(n));
  accumulation_ = n;
}

std::vector<std::string> Session::grad_names() const {
  std::vector<std::string> r;
  if (const BoundStep* g = find_step(StepKind::Grad))
    for (const auto& [out, acc] : g->grad_out()) r.push_back(g->function().outputs[out].state);
  return r;
}

const Tensor& Session::grad(const std::string& name) const {
  require_grad_functions("gradients by name (Session::grad)");
  const Tensor* g = grads_->find(name);
  if (!g) {
    std::string why = state_->has(name) ? "it is not a parameter the step updates"
                                        : "no such parameter";
    fail("no gradient for '" + name + "': " + why);
  }
  return *g;
}

void Session::set_profiling(bool on) { step(StepKind::Train).set_profiling(on); }
const std::vector<NodeTime>& Session::train_profile() const {
  return step(StepKind::Train).profile();
}
const Executor& Session::train_executor() const { return step(StepKind::Train).executor(); }

size_t Session::memory_bytes() const {
  size_t n = state_->bytes() + grads_->bytes();
  for (const auto& [k, b] : steps_) n += b->memory_bytes();
  return n;
}

void Session::eval_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  eval_on(inputs, &target, 1);
}

void Session::eval_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  eval_on(inputs, targets.data(), targets.size());
}

void Session::eval_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n) {
  BoundStep& e = step(StepKind::Eval);
  e.bind_batch(inputs, targets, n);
  *seed_t_.view.as<int64_t>() = rank_seed(seed_, rank());
  *eval_offset_t_.view.as<int64_t>() = eval_offset_++;
  e.run();
}

int Session::eval_output_count() const { return int(step(StepKind::Eval).outputs().size()); }
const Tensor& Session::eval_output() const { return eval_output(0); }
const Tensor& Session::eval_output(int i) const {
  const BoundStep& e = step(StepKind::Eval);
  if (i < 0 || i >= eval_output_count())
    fail("eval output " + std::to_string(i) + " out of range (the model has " +
         std::to_string(eval_output_count()) + ")");
  return e.output(e.outputs()[i]);
}
const std::string& Session::eval_output_name(int i) const {
  static const std::string lone = "output";
  const BoundStep& e = step(StepKind::Eval);
  eval_output(i);  // range check
  const std::string& n = e.function().outputs[e.outputs()[i]].name;
  return n.empty() ? lone : n;  // artifacts before named outputs
}
bool Session::eval_loss_per_sample() const { return step(StepKind::Eval).sample_loss() >= 0; }
const Tensor& Session::eval_sample_loss() const {
  const BoundStep& e = step(StepKind::Eval);
  if (e.sample_loss() < 0)
    fail(artifact_->path + ": its eval step gives the batch's loss, not each sample's "
         "(eval_batch_loss)");
  return e.output(e.sample_loss());
}
const Tensor& Session::eval_batch_loss() const {
  const BoundStep& e = step(StepKind::Eval);
  if (e.batch_loss() < 0)
    fail(artifact_->path + ": its eval step gives each sample's loss (eval_sample_loss)");
  return e.output(e.batch_loss());
}

void Session::save_checkpoint(const std::string& path, const std::optional<RunPosition>& run,
                              const std::map<std::string, std::string>& extra) const {
  CheckpointMeta m;
  m.model = program().name;
  m.step = step_;
  m.seed = seed_;
  m.lr = lr_;
  m.nonfinite_skips = nonfinite_->skipped();
  m.run = run;
  m.extra = extra;
  state_->sync_host();
  std::map<std::string, const Tensor*> all;
  for (const auto& n : state_->names()) all[n] = &state_->host().at(n).view;
  // Sharded: rank 0 writes the whole state, the optimizer state of the
  // other ranks sent to it one tensor at a time (ZeroRedundancyOptimizer's
  // consolidate_state_dict does the same).
  std::map<std::string, HostTensor> others;  // what the other ranks hold (rank 0)
  if (shard_) {
    for (const auto& s : program().state) {  // the same order on every rank
      auto it = shard_->state_owner.find(s.name);
      if (it == shard_->state_owner.end() || it->second == 0) continue;
      const int holder = it->second;
      // The holder sends from its own tensor; the others receive a copy.
      void* buf = rank() == holder
          ? all.at(s.name)->data
          : others.emplace(s.name, HostTensor(s.type.dtype, s.type.shape)).first->second.view.data;
      collective()->broadcast(buf, s.type.nbytes(), holder,
                              "gathering the optimizer state for a checkpoint");
      if (rank() == 0) all[s.name] = &others.at(s.name).view;
      else if (rank() != holder) others.erase(s.name);
    }
    if (rank() != 0) return;
  }
  write_checkpoint(path, checkpoint_metadata(m), program(), all);
}

CheckpointMeta Session::load_checkpoint(const std::string& path) {
  return load_checkpoint(path, read_safetensors(path));
}

CheckpointMeta Session::load_checkpoint(const std::string& path, SafeTensors ck) {
  // Check everything before changing anything, so a bad file leaves the
  // session as it was.
  CheckpointMeta m = parse_checkpoint_metadata(ck.metadata, path);
  check_checkpoint_fits(ck, m, program(), path);
  for (const auto& n : state_->names()) set_state(n, ck.find(n)->view);
  micro_ = 0;
  nonfinite_->set_pending(false);
  step_ = m.step;
  seed_ = m.seed;
  lr_ = m.lr;
  nonfinite_->set_skipped(m.nonfinite_skips);
  nonfinite_->start_step();
  return m;
}

}  // namespace ts

#include "trainstep/session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "io/checksum.h"
#include "io/safetensors.h"
#include "passes/data_parallel.h"
#include "passes/pipeline.h"
#include "runtime/artifact.h"
#include "runtime/bound_step.h"
#include "runtime/checkpoint_file.h"
#include "runtime/device.h"
#include "trainstep/cpu.h"

namespace ts {

namespace {

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

// acc = g (first) or acc += g, in the gradients' dtype (float32 or float64).
template <class T>
void accumulate(const Tensor& g, Tensor& acc, bool first) {
  const T* s = g.as<T>();
  T* a = acc.as<T>();
  if (first) {
    std::memcpy(a, s, acc.nbytes());
    return;
  }
  for (int64_t i = 0, n = acc.numel(); i < n; ++i) a[i] += s[i];
}

template <class T>
void scale(Tensor& t, T f) {
  T* a = t.as<T>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) a[i] *= f;
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
    : artifact_(std::move(a)), opts_(o) {
  check_cpu_baseline();
  apply_cpu_isa_env();  // before the kernels, and oneDNN, choose their level
  const Program& p = artifact_->program;
  // Sizes are checked against the memory limit before anything is allocated.
  const size_t limit = o.max_memory ? o.max_memory : physical_memory();
  const std::string limit_text =
      "the memory limit of " + bytes_str(limit) + " (" + std::to_string(limit) + " bytes, " +
      (o.max_memory ? "--max-memory)" : "the machine's physical memory; see --max-memory)");
  for (const auto& s : p.state) state_bytes_ += s.type.nbytes();
  if (state_bytes_ > limit)
    fail(artifact_->path + ": the state needs " + bytes_str(state_bytes_) + ", more than " +
         limit_text);
  for (const auto& [fname, f] : p.functions)
    for (size_t v = 0; v < f.value_types.size(); ++v)
      if (f.value_types[v].nbytes() > limit) {
        const int at = f.producer[v];
        fail(artifact_->path + ": function '" + fname + "': value '" + f.value_names[v] + "'" +
             (at >= 0 ? " (node '" + f.nodes[at].name + "', " + f.nodes[at].op + ")" : "") +
             " is " + f.value_types[v].str() + ", " + bytes_str(f.value_types[v].nbytes()) +
             ", more than " + limit_text);
      }
  for (const auto& s : p.state) {
    names_.push_back(s.name);
    state_.emplace(s.name, HostTensor(s.type.dtype, s.type.shape));
  }
  if (o.device != Device::Cpu) {
    // What the device backend does not do yet, refused before any work.
    if (o.collective && o.collective->size() > 1)
      fail(artifact_->path + ": data-parallel training runs on --device cpu only");
    if (o.on_nonfinite == NonFinite::Skip)
      fail(artifact_->path + ": --on-nonfinite skip runs on --device cpu only (use stop or off)");
    device_ = open_device(o.device);
    size_t bytes = 0;
    std::vector<size_t> offsets;
    for (const auto& s : p.state) {
      offsets.push_back(bytes);
      bytes += (s.type.nbytes() + 255) / 256 * 256;
    }
    device_state_buf_ = device_->alloc(bytes);
    for (size_t i = 0; i < p.state.size(); ++i)
      device_state_[p.state[i].name] = static_cast<char*>(device_state_buf_.get()) + offsets[i];
  }
  reset_state();
  lr_ = p.optimizer.value("lr", 0.0);
  lr_t_ = HostTensor(DType::F32, {});
  seed_t_ = HostTensor(DType::I64, {});
  step_t_ = HostTensor(DType::I64, {});
  eval_offset_t_ = HostTensor(DType::I64, {});

  // The LR input is a 0-d float32, or float64 for a float64 model (the
  // exporter's capture.lr_dtype); every step function must agree.
  bool lr_seen = false;
  for (const char* name : {"train_step", "apply_step"}) {
    if (!p.functions.count(name)) continue;
    const Function& f = p.function(name);
    const int i = f.find_input(Role::Lr);
    if (i < 0) continue;
    const TensorType& t = f.inputs[i].type;
    if (!t.shape.empty() || (t.dtype != DType::F32 && t.dtype != DType::F64))
      fail(artifact_->path + ": " + name + "'s lr input is " + t.str() +
           ", not a 0-d float32 or float64");
    if (lr_seen && t.dtype != lr_t_.view.dtype)
      fail(artifact_->path + ": the step functions' lr inputs differ in dtype");
    if (!lr_seen) lr_t_ = HostTensor(t.dtype, {});
    lr_seen = true;
  }

  // Optimised copies of the step functions the artifact has. With several
  // ranks the train step is grad_step + all-reduce + apply_step.
  const bool parallel = o.collective && o.collective->size() > 1;
  if (parallel) check_replicas();
  if (parallel && (!p.functions.count("grad_step") || !p.functions.count("apply_step")))
    fail(artifact_->path + ": data-parallel training needs grad_step and apply_step; export the "
         "artifact with --grads");
  std::vector<std::pair<StepKind, std::unique_ptr<Function>>> fns;
  for (StepKind k : kStepKinds) {
    if (!p.functions.count(step_function_name(k))) continue;
    // Gradient accumulation is CPU-only for now: a device session has no
    // grad_step/apply_step (grad_step() says so).
    if (device_ && (k == StepKind::Grad || k == StepKind::Apply)) continue;
    auto f = k == StepKind::Train && parallel
                 ? std::make_unique<Function>(data_parallel_step(
                       p.function("grad_step"), p.function("apply_step"), o.buckets, artifact_->path))
                 : std::make_unique<Function>(p.function(step_function_name(k)));
    optimize(*f, o.compile, o.device);
    fns.emplace_back(k, std::move(f));
  }
  const Function* grad_fn = nullptr;
  for (const auto& [k, f] : fns)
    if (k == StepKind::Grad) grad_fn = f.get();
  if (grad_fn)
    for (const Port& out : grad_fn->outputs) {
      if (out.role != Role::Grad) continue;
      const StateSpec* ss = p.find_state(out.state);
      if (!ss || ss->type != out.type ||
          (out.type.dtype != DType::F32 && out.type.dtype != DType::F64))
        fail(artifact_->path + ": grad_step's gradient of '" + out.state +
             "' is not a float32 or float64 tensor shaped like that parameter");
      grads_bytes_ += out.type.nbytes();
    }

  // In place: new state is written into state_'s buffers where the plan
  // allows (the copy-back then finds equal pointers and skips). Skipping a
  // non-finite step needs the old state to survive the step, so that mode
  // does not donate.
  const bool donate = o.on_nonfinite != NonFinite::Skip;
  std::vector<MemoryPlan> plans;
  size_t need = state_bytes_ + grads_bytes_;
  std::string parts;
  for (const auto& [k, f] : fns) {
    plans.push_back(plan_memory(*f, o.compile.inplace, donate));
    need += plans.back().arena_bytes;
    parts += std::string(", ") + f->name + " arena " + bytes_str(plans.back().arena_bytes);
  }
  if (need > limit)
    fail(artifact_->path + ": the session needs " + bytes_str(need) + " (" + std::to_string(need) +
         " bytes: state " + bytes_str(state_bytes_) +
         (grad_fn ? ", gradients " + bytes_str(grads_bytes_) : std::string()) + parts +
         "), more than " + limit_text);

  if (grad_fn)
    for (const Port& out : grad_fn->outputs)
      if (out.role == Role::Grad) grads_.emplace(out.state, HostTensor(out.type.dtype, out.type.shape));
  StepBindings b{&state_, &grads_, lr_t_.view.data, seed_t_.view.data, step_t_.view.data,
                 o.collective.get(), device_.get(), &device_state_};
  for (size_t i = 0; i < fns.size(); ++i) {
    StepBindings bi = b;
    // Eval draws from its own stream position (see eval_step).
    if (fns[i].first == StepKind::Eval) bi.rng_offset = eval_offset_t_.view.data;
    steps_[fns[i].first] = std::make_unique<BoundStep>(fns[i].first, std::move(fns[i].second),
                                                       std::move(plans[i]), o.threads, bi,
                                                       artifact_->path);
  }
  if (const BoundStep* g = find_step(StepKind::Grad))
    if (g->inputs().size() != step(StepKind::Train).inputs().size())
      fail(artifact_->path + ": grad_step takes " + std::to_string(g->inputs().size()) +
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
std::vector<std::string> Session::state_names() const { return names_; }

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

const Tensor& Session::state(const std::string& name) const {
  auto it = state_.find(name);
  if (it == state_.end()) fail("no state tensor named '" + name + "'");
  sync_host_state();
  return it->second.view;
}

void Session::sync_host_state() const {
  if (!device_ || !host_stale_) return;
  for (auto& [name, t] : state_) device_->download(t.view.data, device_state_.at(name), t.view.nbytes());
  host_stale_ = false;
}

std::string Session::device_description() const { return device_ ? device_->name() : "cpu"; }

std::string Session::train_step_description() const {
  const DeviceStep* d = step(StepKind::Train).device_step();
  return d ? d->describe() : std::string();
}

void Session::set_state(const std::string& name, const Tensor& v) {
  auto it = state_.find(name);
  if (it == state_.end()) fail("no state tensor named '" + name + "'");
  if (v.type() != it->second.view.type())
    fail("state '" + name + "' is " + it->second.view.type().str() + ", got " + v.type().str());
  sync_host_state();  // the other tensors' host copies stay current
  std::memcpy(it->second.view.data, v.data, v.nbytes());
  if (device_) device_->upload(device_state_.at(name), v.data, v.nbytes());
}

void Session::reset_state() {
  for (const auto& n : names_) set_state(n, artifact_->tensor("state/" + n).view);
}

float Session::train_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  return train_on(inputs, &target, 1);
}

float Session::train_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  return train_on(inputs, targets.data(), targets.size());
}

float Session::train_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n) {
  BoundStep& t = step(StepKind::Train);
  t.bind_batch(inputs, targets, n);
  set_lr_input();
  *seed_t_.view.as<int64_t>() = rank_seed();
  *step_t_.view.as<int64_t>() = step_;
  const auto t0 = std::chrono::steady_clock::now();
  t.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (device_) host_stale_ = true;  // the step wrote the device state, whatever comes next
  micro_ = 0;  // a whole step drops gradients accumulated but not applied
  skip_pending_ = false;
  last_skipped_ = false;
  const float loss = t.loss_value();
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    // "": no allocation
    std::string bad = t.find_nonfinite(true, t.state_out(), program(), opts_.threads);
    if (!bad.empty()) {
      on_nonfinite(bad);
      report_step(seconds, loss);
      return loss;
    }
  }
  copy_out_state(t, t.state_out());
  ++step_;
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
  m.skipped = last_skipped_;
  on_step_(m);
}

void Session::set_lr_input() {
  if (lr_t_.view.dtype == DType::F64)
    *lr_t_.view.as<double>() = lr_;
  else
    *lr_t_.view.as<float>() = static_cast<float>(lr_);
}

void Session::on_nonfinite(const std::string& what) {
  if (opts_.on_nonfinite == NonFinite::Stop)
    fail("step " + std::to_string(step_) + ": " + what +
         " (--on-nonfinite skip drops such steps instead)");
  // Skip: the old state is intact (no donation); the new one is dropped.
  ++skipped_;
  ++step_;
  last_skipped_ = true;
}

bool Session::has_grad_functions() const { return find_step(StepKind::Grad) != nullptr; }

float Session::grad_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  return grad_on(inputs, &target, 1);
}

float Session::grad_step(const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets) {
  return grad_on(inputs, targets.data(), targets.size());
}

float Session::grad_on(const std::vector<Tensor>& inputs, const Tensor* targets, size_t n) {
  BoundStep* g = find_step(StepKind::Grad);
  if (!g && device_)
    fail(artifact_->path + ": grad_step (gradient accumulation) runs on --device cpu only");
  if (!g)
    fail(artifact_->path + ": grad_step: the artifact has no grad_step (export it with --grads)");
  g->bind_batch(inputs, targets, n);
  *seed_t_.view.as<int64_t>() = rank_seed();
  *step_t_.view.as<int64_t>() = step_ * accumulation_ + micro_;
  const auto t0 = std::chrono::steady_clock::now();
  g->run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const float loss = g->loss_value();
  if (micro_ == 0) {
    skip_pending_ = false;
    micro_seconds_ = 0;
  }
  micro_seconds_ += seconds;
  last_loss_ = loss;
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    std::string bad = g->find_nonfinite(true, g->state_out(), program(), opts_.threads);
    if (bad.empty()) bad = g->find_nonfinite(false, g->grad_out(), program(), opts_.threads);
    if (!bad.empty()) {
      if (opts_.on_nonfinite == NonFinite::Stop)
        fail("step " + std::to_string(step_) + ", micro-batch " + std::to_string(micro_) + ": " +
             bad + " (--on-nonfinite skip drops such steps instead)");
      // Skip: this micro-batch adds nothing; apply_grads drops the step.
      skip_pending_ = true;
      ++micro_;
      return loss;
    }
  }
  copy_out_state(*g, g->state_out());
  for (auto& [out, acc] : g->grad_out()) {
    const Tensor& grad = g->output(out);
    if (acc->dtype == DType::F64)
      accumulate<double>(grad, *acc, micro_ == 0);
    else
      accumulate<float>(grad, *acc, micro_ == 0);
  }
  ++micro_;
  return loss;
}

void Session::apply_grads() {
  BoundStep* ap = find_step(StepKind::Apply);
  if (!ap && device_)
    fail(artifact_->path + ": apply_grads (gradient accumulation) runs on --device cpu only");
  if (!ap)
    fail(artifact_->path +
         ": apply_grads: the artifact has no apply_step (export it with --grads)");
  if (micro_ == 0) fail("apply_grads: no grad_step since the last update");
  last_skipped_ = false;
  // Every rank skips, or none: their updates must stay equal.
  if (world_size() > 1)
    skip_pending_ = collective()->max(skip_pending_ ? 1 : 0, "the skipped-step agreement") != 0;
  if (skip_pending_) {  // a micro-batch was not finite (Skip mode): no update
    micro_ = 0;
    skip_pending_ = false;
    on_nonfinite("");
    report_step(micro_seconds_, last_loss_);
    return;
  }
  // The mean over every micro-batch of every rank.
  const int ranks = world_size();
  if (ranks > 1) reduce_grads();
  if (micro_ > 1 || ranks > 1) {
    const double n = static_cast<double>(micro_) * ranks;
    for (auto& [name, acc] : grads_) {
      if (acc.view.dtype == DType::F64)
        scale<double>(acc.view, 1.0 / n);
      else
        scale<float>(acc.view, 1.0f / static_cast<float>(n));
    }
  }
  set_lr_input();
  const auto t0 = std::chrono::steady_clock::now();
  ap->run();
  const double seconds =
      micro_seconds_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  micro_ = 0;
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    std::string bad = ap->find_nonfinite(false, ap->state_out(), program(), opts_.threads);
    if (!bad.empty()) {
      on_nonfinite(bad);
      report_step(seconds, last_loss_);
      return;
    }
  }
  copy_out_state(*ap, ap->state_out());
  ++step_;
  report_step(seconds, last_loss_);
}

int64_t Session::rank_seed() const {
  const int r = rank();
  if (r == 0) return seed_;
  // splitmix64 of (seed, rank): streams far apart for any seed.
  uint64_t z = static_cast<uint64_t>(seed_) + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(r);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

void Session::check_replicas() const {
  // One number for what must agree across ranks: the model, its state
  // layout and the batch. A mismatch would pair the wrong buffers.
  std::string key = program().name + "/" + std::to_string(batch_size());
  for (const auto& s : program().state) key += "/" + s.name + ":" + s.type.str();
  const int64_t h = static_cast<int64_t>(std::hash<std::string>()(key) >> 1);
  Collective& c = *opts_.collective;
  if (!c.same_everywhere(h, "the artifact check"))
    fail(artifact_->path + ": the ranks loaded different models, state layouts or batch sizes "
         "(rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) + ")");
}

void Session::broadcast_state(int root) {
  Collective* c = collective();
  if (!c || c->size() == 1) return;
  for (const auto& n : names_) {
    Tensor& t = state_.at(n).view;
    c->broadcast(t.data, t.nbytes(), root, "the state broadcast");
  }
  int64_t ints[3] = {step_, seed_, skipped_};
  c->broadcast(ints, sizeof ints, root, "the state broadcast");
  c->broadcast(&lr_, sizeof lr_, root, "the state broadcast");
  step_ = ints[0];
  seed_ = ints[1];
  skipped_ = ints[2];
}

void Session::check_state_replicated() const {
  Collective* c = collective();
  if (!c || c->size() == 1) return;
  // Buffers (BatchNorm's running statistics) are each rank's own.
  Checksummer h;
  for (const auto& s : program().state)
    if (s.kind != "buffer") h.update(state_.at(s.name).view.data, state_.at(s.name).view.nbytes());
  const int64_t v = static_cast<int64_t>(std::stoull(h.hex(), nullptr, 16) >> 1);
  if (!c->same_everywhere(v, "the replica check"))
    fail("step " + std::to_string(step_) + ": the ranks' parameters or optimizer state differ: "
         "the replicas diverged (ranks run with different options, or a reduction gave ranks "
         "different bits)");
}

void Session::reduce_grads() {
  Collective& c = *opts_.collective;
  std::vector<Collective::Request> reqs;
  for (auto& [name, acc] : grads_)
    reqs.push_back(c.all_reduce(acc.view.data, static_cast<size_t>(acc.view.numel()),
                                acc.view.dtype, ReduceOp::Sum, "the accumulated-gradient all-reduce"));
  for (auto r : reqs) c.wait(r);
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
  if (!has_grad_functions())
    fail(artifact_->path + ": gradients by name need an artifact exported with --grads");
  auto it = grads_.find(name);
  if (it == grads_.end()) {
    std::string why = state_.count(name) ? "it is not a parameter the step updates"
                                         : "no such parameter";
    fail("no gradient for '" + name + "': " + why);
  }
  return it->second.view;
}

void Session::set_profiling(bool on) { step(StepKind::Train).set_profiling(on); }
const std::vector<NodeTime>& Session::train_profile() const {
  return step(StepKind::Train).profile();
}
const Executor& Session::train_executor() const { return step(StepKind::Train).executor(); }

size_t Session::memory_bytes() const {
  size_t n = state_bytes_ + grads_bytes_;
  for (const auto& [k, b] : steps_) n += b->memory_bytes();
  return n;
}

// New state goes back into the state buffers (outputs written in place are
// skipped). A new value may *be* another state's old buffer (after
// simplification, `new_b = old_a`): such values are staged first, so no copy
// reads a buffer this loop already overwrote.
void Session::copy_out_state(const BoundStep& b,
                             const std::vector<std::pair<int, Tensor*>>& outs) {
  if (device_) return;  // the step wrote its new state into the device state
  auto in_state = [&](const void* p) {
    for (const auto& [name, t] : state_) {
      const char* base = static_cast<const char*>(t.view.data);
      if (p >= base && p < base + t.view.nbytes()) return true;
    }
    return false;
  };
  size_t staged = 0;
  for (auto& [out, dst] : outs) {
    const Tensor& src = b.output(out);
    if (src.data == dst->data || !in_state(src.data)) continue;
    if (staging_.size() < state_bytes_) staging_ = Buffer(state_bytes_);  // once, if ever
    std::memcpy(static_cast<char*>(staging_.data()) + staged, src.data, dst->nbytes());
    staged += dst->nbytes();
  }
  size_t off = 0;
  for (auto& [out, dst] : outs) {
    const Tensor& src = b.output(out);
    if (src.data == dst->data) continue;
    if (in_state(src.data)) {
      std::memcpy(dst->data, static_cast<char*>(staging_.data()) + off, dst->nbytes());
      off += dst->nbytes();
    } else {
      std::memcpy(dst->data, src.data, dst->nbytes());
    }
  }
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
  *seed_t_.view.as<int64_t>() = rank_seed();
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
  m.nonfinite_skips = skipped_;
  m.run = run;
  m.extra = extra;
  sync_host_state();
  write_checkpoint(path, checkpoint_metadata(m), program(), names_, state_);
}

CheckpointMeta Session::load_checkpoint(const std::string& path) {
  return load_checkpoint(path, read_safetensors(path));
}

CheckpointMeta Session::load_checkpoint(const std::string& path, SafeTensors ck) {
  // Check everything before changing anything, so a bad file leaves the
  // session as it was.
  CheckpointMeta m = parse_checkpoint_metadata(ck.metadata, path);
  check_checkpoint_fits(ck, m, program(), state_, path);
  for (const auto& n : names_) set_state(n, ck.find(n)->view);
  micro_ = 0;
  skip_pending_ = false;
  step_ = m.step;
  seed_ = m.seed;
  lr_ = m.lr;
  skipped_ = m.nonfinite_skips;
  last_skipped_ = false;
  return m;
}

}  // namespace ts

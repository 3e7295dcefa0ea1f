#include "trainstep/session.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/safetensors.h"
#include "runtime/artifact.h"
#include "runtime/executor.h"
#include "runtime/formats.h"
#include "runtime/nonfinite.h"

namespace ts {

namespace {

// Tensor::type() copies the shape: compare in place, this runs every step.
bool has_type(const Tensor& t, const TensorType& want) {
  return t.dtype == want.dtype && t.shape == want.shape;
}

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

// A whole-string integer (std::stoll alone accepts "12abc").
int64_t parse_int(const std::string& s) {
  size_t pos = 0;
  int64_t v = std::stoll(s, &pos);
  if (pos != s.size()) throw std::invalid_argument(s);
  return v;
}

double element(const Tensor& t, int64_t i) {
  return t.dtype == DType::F64 ? t.as<double>()[i] : t.as<float>()[i];
}

// The step's loss (float32 or float64, 0-d) as the float train_step returns.
float loss_value(const Tensor& t) { return static_cast<float>(element(t, 0)); }

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

std::vector<int> slots_of(const Function& f, const char* role) {
  std::vector<int> r;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (f.inputs[i].role == role) r.push_back(static_cast<int>(i));
  // Model inputs are ordered by their index.
  std::sort(r.begin(), r.end(),
            [&](int a, int b) { return f.inputs[a].index < f.inputs[b].index; });
  return r;
}
}  // namespace

size_t parse_memory_size(const std::string& text) {
  size_t pos = 0;
  double v = -1;
  try {
    v = std::stod(text, &pos);
  } catch (const std::logic_error&) {
  }
  std::string unit = text.substr(std::min(pos, text.size()));
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (!(v > 0) || scale == 0 || !std::isfinite(v * scale) || v * scale >= 0x1p63)
    fail("bad memory size '" + text + "' (expected e.g. 512M, 2G, 1.5GiB or a byte count)");
  return static_cast<size_t>(v * scale);
}

std::unique_ptr<Session> Session::open(const std::string& path, SessionOptions o) {
  auto a = std::make_shared<Artifact>(load_artifact(path));
  return std::make_unique<Session>(std::move(a), o);
}

Session::Session(std::shared_ptr<const Artifact> a, SessionOptions o)
    : artifact_(std::move(a)), opts_(o) {
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
  reset_state();
  lr_ = p.optimizer.value("lr", 0.0);
  lr_t_ = HostTensor(DType::F32, {});
  seed_t_ = HostTensor(DType::I64, {});
  step_t_ = HostTensor(DType::I64, {});
  eval_offset_t_ = HostTensor(DType::I64, {});

  train_fn_ = std::make_unique<Function>(p.function("train_step"));
  eval_fn_ = std::make_unique<Function>(p.function("eval_step"));
  optimize(*train_fn_, o.compile);
  optimize(*eval_fn_, o.compile);
  const bool grads = p.functions.count("grad_step") > 0;
  // The LR input is a 0-d float32, or float64 for a float64 model (the
  // exporter's capture.lr_dtype); every step function must agree.
  {
    const char* lr_fns[] = {"train_step", "apply_step"};
    bool seen = false;
    for (const char* name : lr_fns) {
      if (!p.functions.count(name)) continue;
      const Function& f = p.function(name);
      const int i = f.find_input("lr");
      if (i < 0) continue;
      const TensorType& t = f.inputs[i].type;
      if (!t.shape.empty() || (t.dtype != DType::F32 && t.dtype != DType::F64))
        fail(artifact_->path + ": " + name + "'s lr input is " + t.str() +
             ", not a 0-d float32 or float64");
      if (seen && t.dtype != lr_t_.view.dtype)
        fail(artifact_->path + ": the step functions' lr inputs differ in dtype");
      if (!seen) lr_t_ = HostTensor(t.dtype, {});
      seen = true;
    }
  }
  if (grads) {
    grad_fn_ = std::make_unique<Function>(p.function("grad_step"));
    apply_fn_ = std::make_unique<Function>(p.function("apply_step"));
    optimize(*grad_fn_, o.compile);
    optimize(*apply_fn_, o.compile);
    for (const Port& out : grad_fn_->outputs)
      if (out.role == "grad") grads_bytes_ += out.type.nbytes();
  }
  const Function& tf = *train_fn_;
  const Function& ef = *eval_fn_;
  // In place: new state is written into state_'s buffers where the plan
  // allows (the copy-back below then finds equal pointers and skips).
  // Skipping a non-finite step needs the old state to survive the step, so
  // that mode does not donate.
  const bool donate = o.on_nonfinite != NonFinite::Skip;
  std::vector<MemoryPlan> plans;
  const Function* fns[] = {&tf, &ef, grad_fn_.get(), apply_fn_.get()};
  for (const Function* f : fns)
    if (f) plans.push_back(plan_memory(*f, o.compile.inplace, donate));
  size_t need = state_bytes_ + grads_bytes_;
  std::string parts;
  const char* fnames[] = {"train_step", "eval_step", "grad_step", "apply_step"};
  for (size_t i = 0; i < plans.size(); ++i) {
    need += plans[i].arena_bytes;
    parts += std::string(", ") + fnames[i] + " arena " + bytes_str(plans[i].arena_bytes);
  }
  if (need > limit)
    fail(artifact_->path + ": the session needs " + bytes_str(need) + " (" + std::to_string(need) +
         " bytes: state " + bytes_str(state_bytes_) +
         (grads ? ", gradients " + bytes_str(grads_bytes_) : std::string()) + parts +
         "), more than " + limit_text);
  train_ = std::make_unique<Executor>(tf, o.threads, std::move(plans[0]));
  eval_ = std::make_unique<Executor>(ef, o.threads, std::move(plans[1]));
  bind_runtime_inputs(*train_);
  bind_runtime_inputs(*eval_);
  const int eval_rng_offset = ef.find_input("rng_offset");
  if (eval_rng_offset >= 0) eval_->bind_input(eval_rng_offset, eval_offset_t_.view.data);
  train_inputs_ = slots_of(tf, "input");
  eval_inputs_ = slots_of(ef, "input");
  train_target_ = tf.find_input("target");
  eval_target_ = ef.find_input("target");
  train_loss_ = tf.find_output("loss");
  for (size_t i = 0; i < ef.outputs.size(); ++i)
    if (ef.outputs[i].role == "output") eval_outputs_.push_back(int(i));
  std::sort(eval_outputs_.begin(), eval_outputs_.end(),
            [&](int a, int b) { return ef.outputs[a].index < ef.outputs[b].index; });
  eval_sample_loss_ = ef.find_output("sample_loss");
  if (train_target_ < 0 || eval_target_ < 0 || train_loss_ < 0 || eval_outputs_.empty() ||
      eval_sample_loss_ < 0)
    fail(artifact_->path + ": the step signatures lack a target, loss or output");
  for (size_t i = 0; i < tf.outputs.size(); ++i)
    if (tf.outputs[i].role == "state")
      train_state_out_.emplace_back(int(i), &state_.at(tf.outputs[i].state).view);

  if (!grads) return;
  const Function& gf = *grad_fn_;
  const Function& af = *apply_fn_;
  for (size_t i = 0; i < gf.outputs.size(); ++i) {
    const Port& out = gf.outputs[i];
    if (out.role != "grad") continue;
    const StateSpec* ss = p.find_state(out.state);
    if (!ss || ss->type != out.type ||
        (out.type.dtype != DType::F32 && out.type.dtype != DType::F64))
      fail(artifact_->path + ": grad_step's gradient of '" + out.state +
           "' is not a float32 or float64 tensor shaped like that parameter");
    grads_.emplace(out.state, HostTensor(out.type.dtype, out.type.shape));
  }
  grad_ = std::make_unique<Executor>(gf, o.threads, std::move(plans[2]));
  apply_ = std::make_unique<Executor>(af, o.threads, std::move(plans[3]));
  bind_runtime_inputs(*grad_);
  bind_runtime_inputs(*apply_);
  grad_inputs_ = slots_of(gf, "input");
  grad_target_ = gf.find_input("target");
  grad_loss_ = gf.find_output("loss");
  if (grad_target_ < 0 || grad_loss_ < 0 || grad_inputs_.size() != train_inputs_.size())
    fail(artifact_->path + ": grad_step's signature lacks a target, loss or model input");
  for (size_t i = 0; i < gf.outputs.size(); ++i) {
    const Port& out = gf.outputs[i];
    if (out.role == "state") grad_state_out_.emplace_back(int(i), &state_.at(out.state).view);
    if (out.role == "grad") grad_out_.emplace_back(int(i), &grads_.at(out.state).view);
  }
  for (size_t i = 0; i < af.outputs.size(); ++i)
    if (af.outputs[i].role == "state")
      apply_state_out_.emplace_back(int(i), &state_.at(af.outputs[i].state).view);
}

// Binds a function's state, LR, RNG and gradient inputs to the session's
// tensors (model inputs and target are bound per call).
void Session::bind_runtime_inputs(Executor& ex) {
  const Function& f = ex.function();
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& in = f.inputs[i];
    if (in.role == "state") ex.bind_input(int(i), state_.at(in.state).view.data);
    else if (in.role == "lr") ex.bind_input(int(i), lr_t_.view.data);
    else if (in.role == "rng_seed") ex.bind_input(int(i), seed_t_.view.data);
    else if (in.role == "rng_offset") ex.bind_input(int(i), step_t_.view.data);
    else if (in.role == "grad" && grads_.count(in.state))
      ex.bind_input(int(i), grads_.at(in.state).view.data);
    else if (in.role != "input" && in.role != "target")
      fail(artifact_->path + ": function '" + f.name + "' has an input with unknown role '" +
           in.role + "'");
  }
}

Session::~Session() = default;

const Program& Session::program() const { return artifact_->program; }
int64_t Session::batch_size() const { return artifact_->program.batch_size; }
std::vector<std::string> Session::state_names() const { return names_; }

const Tensor& Session::state(const std::string& name) const {
  auto it = state_.find(name);
  if (it == state_.end()) fail("no state tensor named '" + name + "'");
  return it->second.view;
}

void Session::set_state(const std::string& name, const Tensor& v) {
  auto it = state_.find(name);
  if (it == state_.end()) fail("no state tensor named '" + name + "'");
  if (v.type() != it->second.view.type())
    fail("state '" + name + "' is " + it->second.view.type().str() + ", got " + v.type().str());
  std::memcpy(it->second.view.data, v.data, v.nbytes());
}

void Session::reset_state() {
  for (const auto& n : names_) set_state(n, artifact_->tensor("state/" + n).view);
}

void Session::check_batch(const Function& f, const std::vector<Tensor>& inputs,
                          const Tensor& target, const std::vector<int>& slots,
                          int target_slot) const {
  const std::string fn = f.name;
  if (inputs.size() != slots.size())
    fail(std::string(fn) + ": expected " + std::to_string(slots.size()) + " model input(s), got " +
         std::to_string(inputs.size()));
  for (size_t i = 0; i < slots.size(); ++i)
    if (!has_type(inputs[i], f.inputs[slots[i]].type) || !inputs[i].data)
      fail(std::string(fn) + ": input " + std::to_string(i) + " (" + f.inputs[slots[i]].name +
           ") is " + inputs[i].type().str() + ", expected " + f.inputs[slots[i]].type.str() +
           " (the artifact's batch)");
  if (!has_type(target, f.inputs[target_slot].type) || !target.data)
    fail(std::string(fn) + ": target is " + target.type().str() + ", expected " +
         f.inputs[target_slot].type.str());
}

float Session::train_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  check_batch(*train_fn_, inputs, target, train_inputs_, train_target_);
  for (size_t i = 0; i < inputs.size(); ++i) train_->bind_input(train_inputs_[i], inputs[i].data);
  train_->bind_input(train_target_, target.data);
  set_lr_input();
  *seed_t_.view.as<int64_t>() = seed_;
  *step_t_.view.as<int64_t>() = step_;
  train_->run();
  micro_ = 0;  // a whole step drops gradients accumulated but not applied
  skip_pending_ = false;
  last_skipped_ = false;
  const float loss = loss_value(train_->output(train_loss_));
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    std::string bad = find_nonfinite(*train_, train_loss_, train_state_out_);  // "": no allocation
    if (!bad.empty()) {
      on_nonfinite(bad);
      return loss;
    }
  }
  copy_out_state(*train_, train_state_out_);
  ++step_;
  return loss;
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

std::string Session::find_nonfinite(const Executor& ex, int loss,
                                    const std::vector<std::pair<int, Tensor*>>& outs) const {
  auto describe = [](const Tensor& t, int64_t i) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", element(t, i));
    return std::string(b) + (t.shape.empty() ? "" : " at element " + std::to_string(i));
  };
  if (loss >= 0) {
    const Tensor& l = ex.output(loss);
    if (int64_t i = first_nonfinite(l, opts_.threads); i >= 0) return "the loss is " + describe(l, i);
  }
  const Function& fn = ex.function();
  for (const auto& [out, dst] : outs) {
    const Port& port = fn.outputs[out];
    // A state the step passes through unchanged (a constant buffer such as
    // an attention mask of -inf) was not made non-finite by this step.
    const int in = fn.find_input("state", port.state);
    if (port.role == "state" && in >= 0 && fn.inputs[in].value == port.value) continue;
    const Tensor& t = ex.output(out);
    const int64_t i = first_nonfinite(t, opts_.threads);
    if (i < 0) continue;
    if (port.role == "grad") return "the gradient of '" + port.state + "' is " + describe(t, i);
    const StateSpec* spec = program().find_state(port.state);
    return "the new value of '" + port.state + "' (" + (spec ? spec->kind : "state") + ") is " +
           describe(t, i);
  }
  return {};
}

float Session::grad_step(const std::vector<Tensor>& inputs, const Tensor& target) {
  if (!grad_)
    fail(artifact_->path + ": grad_step: the artifact has no grad_step (export it with --grads)");
  check_batch(*grad_fn_, inputs, target, grad_inputs_, grad_target_);
  for (size_t i = 0; i < inputs.size(); ++i) grad_->bind_input(grad_inputs_[i], inputs[i].data);
  grad_->bind_input(grad_target_, target.data);
  *seed_t_.view.as<int64_t>() = seed_;
  *step_t_.view.as<int64_t>() = step_ * accumulation_ + micro_;
  grad_->run();
  const float loss = loss_value(grad_->output(grad_loss_));
  if (micro_ == 0) skip_pending_ = false;
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    std::string bad = find_nonfinite(*grad_, grad_loss_, grad_state_out_);
    if (bad.empty()) bad = find_nonfinite(*grad_, -1, grad_out_);
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
  copy_out_state(*grad_, grad_state_out_);
  for (auto& [out, acc] : grad_out_) {
    const Tensor& g = grad_->output(out);
    if (acc->dtype == DType::F64)
      accumulate<double>(g, *acc, micro_ == 0);
    else
      accumulate<float>(g, *acc, micro_ == 0);
  }
  ++micro_;
  return loss;
}

void Session::apply_grads() {
  if (!apply_)
    fail(artifact_->path +
         ": apply_grads: the artifact has no apply_step (export it with --grads)");
  if (micro_ == 0) fail("apply_grads: no grad_step since the last update");
  last_skipped_ = false;
  if (skip_pending_) {  // a micro-batch was not finite (Skip mode): no update
    micro_ = 0;
    skip_pending_ = false;
    on_nonfinite("");
    return;
  }
  if (micro_ > 1) {
    for (auto& [name, acc] : grads_) {
      if (acc.view.dtype == DType::F64)
        scale<double>(acc.view, 1.0 / static_cast<double>(micro_));
      else
        scale<float>(acc.view, 1.0f / static_cast<float>(micro_));
    }
  }
  set_lr_input();
  apply_->run();
  micro_ = 0;
  if (opts_.on_nonfinite != NonFinite::Ignore) {
    std::string bad = find_nonfinite(*apply_, -1, apply_state_out_);
    if (!bad.empty()) {
      on_nonfinite(bad);
      return;
    }
  }
  copy_out_state(*apply_, apply_state_out_);
  ++step_;
}

void Session::set_accumulation(int64_t n) {
  if (n < 1) fail("gradient accumulation must be at least 1 micro-batch, got " + std::to_string(n));
  accumulation_ = n;
}

std::vector<std::string> Session::grad_names() const {
  std::vector<std::string> r;
  if (grad_fn_)
    for (const auto& out : grad_fn_->outputs)
      if (out.role == "grad") r.push_back(out.state);
  return r;
}

const Tensor& Session::grad(const std::string& name) const {
  if (!grad_)
    fail(artifact_->path + ": gradients by name need an artifact exported with --grads");
  auto it = grads_.find(name);
  if (it == grads_.end()) {
    std::string why = state_.count(name) ? "it is not a parameter the step updates"
                                         : "no such parameter";
    fail("no gradient for '" + name + "': " + why);
  }
  return it->second.view;
}

void Session::set_profiling(bool on) { train_->set_profiling(on); }

size_t Session::memory_bytes() const {
  size_t n = state_bytes_ + grads_bytes_;
  for (const Executor* ex : {train_.get(), eval_.get(), grad_.get(), apply_.get()})
    if (ex) n += ex->arena_bytes();
  return n;
}

// New state goes back into the state buffers (outputs written in place are
// skipped). A new value may *be* another state's old buffer (after
// simplification, `new_b = old_a`): such values are staged first, so no copy
// reads a buffer this loop already overwrote.
void Session::copy_out_state(const Executor& ex,
                             const std::vector<std::pair<int, Tensor*>>& outs) {
  auto in_state = [&](const void* p) {
    for (const auto& [name, t] : state_) {
      const char* b = static_cast<const char*>(t.view.data);
      if (p >= b && p < b + t.view.nbytes()) return true;
    }
    return false;
  };
  size_t staged = 0;
  for (auto& [out, dst] : outs) {
    const Tensor& src = ex.output(out);
    if (src.data == dst->data || !in_state(src.data)) continue;
    if (staging_.size() < state_bytes_) staging_ = Buffer(state_bytes_);  // once, if ever
    std::memcpy(static_cast<char*>(staging_.data()) + staged, src.data, dst->nbytes());
    staged += dst->nbytes();
  }
  size_t off = 0;
  for (auto& [out, dst] : outs) {
    const Tensor& src = ex.output(out);
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
  check_batch(*eval_fn_, inputs, target, eval_inputs_, eval_target_);
  for (size_t i = 0; i < inputs.size(); ++i) eval_->bind_input(eval_inputs_[i], inputs[i].data);
  eval_->bind_input(eval_target_, target.data);
  *seed_t_.view.as<int64_t>() = seed_;
  *eval_offset_t_.view.as<int64_t>() = eval_offset_++;
  eval_->run();
}

const Tensor& Session::eval_output() const {
  return eval_->output(eval_outputs_[0]);
}
int Session::eval_output_slot(int i) const {
  if (i < 0 || i >= eval_output_count())
    fail("eval output " + std::to_string(i) + " out of range (the model has " +
         std::to_string(eval_output_count()) + ")");
  return eval_outputs_[i];
}
const Tensor& Session::eval_output(int i) const {
  return eval_->output(eval_output_slot(i));
}
const std::string& Session::eval_output_name(int i) const {
  static const std::string lone = "output";
  const std::string& n = eval_fn_->outputs[eval_output_slot(i)].name;
  return n.empty() ? lone : n;  // artifacts before named outputs
}
const Tensor& Session::eval_sample_loss() const {
  return eval_->output(eval_sample_loss_);
}

void Session::save_checkpoint(const std::string& path,
                              const std::map<std::string, std::string>& extra) const {
  std::map<std::string, std::string> meta = extra;
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = kCheckpointVersion;
  meta["model"] = program().name;
  meta["step"] = std::to_string(step_);
  meta["seed"] = std::to_string(seed_);
  meta["nonfinite_skips"] = std::to_string(skipped_);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", lr_);
  meta["lr"] = buf;
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& n : names_) tensors.emplace_back(n, &state_.at(n).view);
  // Tied weights: every state_dict name, so model.load_state_dict takes it.
  for (const auto& [alias, target] : program().aliases)
    tensors.emplace_back(alias, &state_.at(target).view);
  write_safetensors(path, meta, tensors);
}

std::map<std::string, std::string> Session::load_checkpoint(const std::string& path) {
  return load_checkpoint(path, read_safetensors(path));
}

std::map<std::string, std::string> Session::load_checkpoint(const std::string& path,
                                                            SafeTensors ck) {
  auto it = ck.metadata.find("format");
  if (it == ck.metadata.end() || it->second != kCheckpointFormat)
    fail(path + ": not a trainstep checkpoint");
  if (ck.metadata["format_version"] != kCheckpointVersion)
    fail(path + ": unsupported checkpoint version '" + ck.metadata["format_version"] + "'");
  // Check everything before changing anything, so a bad file leaves the
  // session as it was.
  for (const auto& n : names_) {
    const HostTensor* t = ck.find(n);
    if (!t)
      fail(path + ": checkpoint is for a different model: it has no tensor '" + n +
           "' (model '" + ck.metadata["model"] + "', this artifact is '" + program().name + "')");
    if (t->view.type() != state_.at(n).view.type())
      fail(path + ": checkpoint is for a different model: '" + n + "' is " +
           t->view.type().str() + ", this artifact needs " + state_.at(n).view.type().str());
  }
  const auto& aliases = program().aliases;
  for (const auto& [n, t] : ck.tensors) {
    if (state_.count(n)) continue;
    auto al = aliases.find(n);  // a tied weight's second name: same tensor, ignored
    if (al == aliases.end())
      fail(path + ": checkpoint is for a different model: unexpected tensor '" + n + "'");
    if (t.view.type() != state_.at(al->second).view.type())
      fail(path + ": checkpoint is for a different model: '" + n + "' (tied to '" + al->second +
           "') is " + t.view.type().str() + ", this artifact needs " +
           state_.at(al->second).view.type().str());
  }
  auto num = [&](const char* k) -> std::string {
    auto m = ck.metadata.find(k);
    if (m == ck.metadata.end()) fail(path + ": checkpoint metadata lacks '" + k + "'");
    return m->second;
  };
  int64_t step, seed, skipped = 0;
  double lr;
  try {
    step = parse_int(num("step"));
    seed = parse_int(num("seed"));
    lr = std::stod(num("lr"));
    if (ck.metadata.count("nonfinite_skips")) skipped = parse_int(ck.metadata["nonfinite_skips"]);
  } catch (const std::logic_error&) {
    fail(path + ": checkpoint metadata has a malformed step, seed, lr or nonfinite_skips");
  }
  if (step < 0 || skipped < 0 || skipped > step)
    fail(path + ": checkpoint metadata has a negative step or more skipped steps than steps");
  for (const auto& n : names_) set_state(n, ck.find(n)->view);
  micro_ = 0;
  skip_pending_ = false;
  step_ = step;
  seed_ = seed;
  lr_ = lr;
  skipped_ = skipped;
  last_skipped_ = false;
  return ck.metadata;
}

}  // namespace ts

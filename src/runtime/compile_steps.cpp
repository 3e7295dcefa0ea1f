#include "runtime/compile_steps.h"

#include <unistd.h>

#include <optional>

#include "passes/data_parallel.h"
#include "passes/pipeline.h"
#include "passes/split_train_step.h"

namespace ts {

namespace {

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

// The LR input is a 0-d float32, or float64 for a float64 model (the
// exporter's capture.lr_dtype); every step function must agree.
DType lr_dtype(const Program& p, const std::string& artifact) {
  bool seen = false;
  DType dt = DType::F32;
  for (const char* name : {"train_step", "apply_step"}) {
    if (!p.functions.count(name)) continue;
    const Function& f = p.function(name);
    const int i = f.find_input(Role::Lr);
    if (i < 0) continue;
    const TensorType& t = f.inputs[i].type;
    if (!t.shape.empty() || (t.dtype != DType::F32 && t.dtype != DType::F64))
      fail(artifact + ": " + name + "'s lr input is " + t.str() +
           ", not a 0-d float32 or float64");
    if (seen && t.dtype != dt) fail(artifact + ": the step functions' lr inputs differ in dtype");
    dt = t.dtype;
    seen = true;
  }
  return dt;
}

}  // namespace

std::string runs_only_on(const std::string& what, bool Target::*field) {
  return what + " runs on --device " + devices_with(field) + " only";
}

void check_supported(const SessionOptions& o, const Target& t, const std::string& artifact) {
  if (o.collective && o.collective->size() > 1 && !t.data_parallel)
    fail(artifact + ": " + runs_only_on("data-parallel training", &Target::data_parallel));
  if (o.on_nonfinite == NonFinite::Skip && !t.skip_nonfinite)
    fail(artifact + ": " + runs_only_on("--on-nonfinite skip", &Target::skip_nonfinite) +
         " (use stop or off)");
}

CompiledSteps compile_steps(const Artifact& a, const SessionOptions& o, const Target& t) {
  const Program& p = a.program;
  const std::string& path = a.path;
  const size_t limit = o.max_memory ? o.max_memory : physical_memory();
  const std::string limit_text =
      "the memory limit of " + bytes_str(limit) + " (" + std::to_string(limit) + " bytes, " +
      (o.max_memory ? "--max-memory)" : "the machine's physical memory; see --max-memory)");
  // bfloat16 computes inside a step (autocast); the runtime's own reads of
  // state, gradients and losses (accumulation, the non-finite check, the
  // logged loss) are float32/float64.
  const char* kBf16Fix =
      ": trainstep trains bfloat16 under autocast with float32 parameters and optimizer "
      "state (TrainSpec(autocast=torch.bfloat16), docs/bf16.md); a model moved wholly to "
      "bfloat16 is not supported";
  for (const auto& s : p.state)
    if (s.type.dtype == DType::BF16) fail(path + ": state '" + s.name + "' is bfloat16" + kBf16Fix);
  if (!t.bf16)
    for (const auto& [fname, f] : p.functions)
      for (const auto& vt : f.value_types)
        if (vt.dtype == DType::BF16)
          fail(path + ": function '" + fname + "' computes in bfloat16 (an autocast export), which " +
               runs_only_on("bfloat16", &Target::bf16) + " for now");
  for (const auto& [fname, f] : p.functions)
    for (const auto& out : f.outputs)
      if (out.type.dtype == DType::BF16 && (out.role == Role::Loss || out.role == Role::SampleLoss ||
                                            out.role == Role::BatchLoss || out.role == Role::Grad))
        fail(path + ": function '" + fname + "': output '" + out.name + "' is bfloat16" + kBf16Fix);
  CompiledSteps r;
  const bool parallel = o.collective && o.collective->size() > 1;
  const int rank = parallel ? o.collective->rank() : 0;
  // grad_step and apply_step: the artifact's (export --grads), or cut from
  // train_step where a run needs them (data-parallel, accumulation).
  const bool exported = p.functions.count("grad_step") > 0;
  std::optional<SplitSteps> split;
  const bool named = !p.function("train_step").grads.empty();
  if (!exported && (parallel || (o.grad_steps && t.grad_steps && named)))
    split = split_train_step(p, path);  // fails, saying why, where it cannot
  auto function = [&](StepKind k) -> const Function* {
    if (split && k == StepKind::Grad) return &split->grad;
    if (split && k == StepKind::Apply) return &split->apply;
    auto it = p.functions.find(step_function_name(k));
    return it == p.functions.end() ? nullptr : &it->second;
  };
  if (o.shard_optimizer && parallel)
    r.shard = plan_shards(*function(StepKind::Apply), o.collective->size(), path);

  size_t state_bytes = 0;
  for (const auto& s : p.state)
    if (!r.shard || r.shard->holds(s.name, rank)) state_bytes += s.type.nbytes();
  if (state_bytes > limit)
    fail(path + ": the state needs " + bytes_str(state_bytes) + ", more than " + limit_text);
  for (const auto& [fname, f] : p.functions)
    for (size_t v = 0; v < f.value_types.size(); ++v)
      if (f.value_types[v].nbytes() > limit) {
        const int at = f.producer[v];
        fail(path + ": function '" + fname + "': value '" + f.value_names[v] + "'" +
             (at >= 0 ? " (node '" + f.nodes[at].name + "', " + f.nodes[at].op + ")" : "") +
             " is " + f.value_types[v].str() + ", " + bytes_str(f.value_types[v].nbytes()) +
             ", more than " + limit_text);
      }

  r.lr_dtype = lr_dtype(p, path);
  for (StepKind k : kStepKinds) {
    const Function* src = function(k);
    if (!src) continue;
    // A target without gradient accumulation has no grad_step/apply_step
    // (Session::grad_step says so); derived ones are there only when asked.
    if ((k == StepKind::Grad || k == StepKind::Apply) &&
        (!t.grad_steps || (split && !o.grad_steps)))
      continue;
    const ShardPlan* shard = r.shard ? &*r.shard : nullptr;
    auto f = k == StepKind::Train && parallel
                 ? std::make_unique<Function>(data_parallel_step(*function(StepKind::Grad),
                                                                 *function(StepKind::Apply),
                                                                 o.buckets, path, shard, rank))
             : k == StepKind::Apply && shard
                 ? std::make_unique<Function>(shard_apply(*src, *shard, rank, o.buckets, path))
                 : std::make_unique<Function>(*src);
    optimize(*f, o.compile, t);
    r.steps.push_back({k, std::move(f), {}});
    if (k == StepKind::Grad) r.grad_step = r.steps.back().fn.get();
  }
  size_t grads_bytes = 0;
  if (r.grad_step)
    for (const Port& out : r.grad_step->outputs) {
      if (out.role != Role::Grad) continue;
      const StateSpec* ss = p.find_state(out.state);
      if (!ss || ss->type != out.type ||
          (out.type.dtype != DType::F32 && out.type.dtype != DType::F64))
        fail(path + ": grad_step's gradient of '" + out.state +
             "' is not a float32 or float64 tensor shaped like that parameter");
      grads_bytes += out.type.nbytes();
    }

  // In place: new state is written into the state's buffers where the plan
  // allows. Skipping a non-finite step needs the old state to survive the
  // step, so that mode does not donate.
  const bool donate = o.on_nonfinite != NonFinite::Skip;
  size_t need = state_bytes + grads_bytes;
  std::string parts;
  for (CompiledStep& s : r.steps) {
    s.plan = plan_memory(*s.fn, o.compile.inplace, donate);
    need += s.plan.arena_bytes;
    parts += std::string(", ") + s.fn->name + " arena " + bytes_str(s.plan.arena_bytes);
  }
  if (need > limit)
    fail(path + ": the session needs " + bytes_str(need) + " (" + std::to_string(need) +
         " bytes: state " + bytes_str(state_bytes) +
         (r.grad_step ? ", gradients " + bytes_str(grads_bytes) : std::string()) + parts +
         "), more than " + limit_text);
  return r;
}

}  // namespace ts

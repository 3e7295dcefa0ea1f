#include "runtime/executor.h"

#include <omp.h>

#include <chrono>

#include "runtime/thread_choice.h"

namespace ts {
namespace {

// The bytes a node's inputs and outputs hold (thread_choice.h).
size_t io_bytes(const Function& f, const Node& n, const NodeIO& io) {
  size_t b = 0;
  for (const TensorType& t : io.out_types) b += t.nbytes();
  for (int v : n.inputs)
    if (v >= 0) b += f.value_types[v].nbytes();
  return b;
}

}  // namespace

Executor::Executor(const Function& f, int threads, bool inplace)
    : Executor(f, threads, plan_memory(f, inplace)) {}

Executor::Executor(const Function& f, int threads, MemoryPlan plan, Collective* collective)
    : f_(f), threads_(threads > 0 ? threads : omp_get_max_threads()), plan_(std::move(plan)) {
  // Before any kernel is built: an OpenMP pool started wider than asked
  // would keep idle threads spinning.
  omp_set_num_threads(threads_);
  const size_t nv = f.value_names.size();
  values_.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    values_[v].dtype = f.value_types[v].dtype;
    values_[v].shape = f.value_types[v].shape;
  }
  arena_ = Buffer(plan_.arena_bytes);
  for (size_t v = 0; v < nv; ++v)
    if (plan_.has_slot(int(v)))
      values_[v].data = static_cast<char*>(arena_.data()) + plan_.offset[v];

  for (const auto& n : f.nodes) {
    if (n.def->alias_input0) continue;
    Step s;
    s.node = &n;
    s.io = node_io(f, n, plan_);
    NodeCtx ctx = node_ctx(f, n);
    KernelCtx kctx{ctx, s.io.out_types, threads_, collective};
    s.kernel = make_node_kernel(*n.def, kctx, io_bytes(f, n, s.io));
    // A node nobody reads (kept without cleanup) is made, so it is
    // validated, but never run: kernels need not handle all outputs null.
    // A collective runs anyway: every rank must take part in each one.
    if (!s.io.any_live && n.def->comm == CommRole::None) continue;
    times_.push_back({&n, 0});
    steps_.push_back(std::move(s));
  }
}

std::vector<std::pair<const Node*, const KernelChoice*>> Executor::kernel_choices() const {
  std::vector<std::pair<const Node*, const KernelChoice*>> r;
  for (const auto& s : steps_)
    for (const KernelChoice* c : s.kernel->choices()) r.push_back({s.node, c});
  return r;
}

void Executor::reset_profile() {
  for (auto& t : times_) t.seconds = t.layout_seconds = 0;
}

void Executor::bind_input(int i, void* data) {
  values_[f_.inputs.at(i).value].data = data;
  dirty_ = true;
}

void Executor::refresh() {
  // Views and donated outputs take their root's pointer (an arena slot or
  // caller-bound memory); roots are never aliases themselves.
  for (size_t v = 0; v < values_.size(); ++v)
    if (plan_.root[v] != static_cast<int>(v)) values_[v].data = values_[plan_.root[v]].data;
  for (auto& s : steps_) s.io.point(*s.node, values_);
  dirty_ = false;
}

void Executor::run() {
  for (const auto& p : f_.inputs)
    if (!values_[p.value].data && p.type.nbytes() > 0)
      fail("function '" + f_.name + "': input '" + p.name + "' is not bound");
  if (dirty_) refresh();
  omp_set_num_threads(threads_);
  if (observer_) return run_observed();
  if (!profiling_) {
    for (auto& s : steps_) s.kernel->run(s.io.in.data(), s.io.out.data());
    return;
  }
  using clock = std::chrono::steady_clock;
  LayoutTimer::on() = true;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const double layout0 = LayoutTimer::seconds();
    auto t0 = clock::now();
    steps_[i].kernel->run(steps_[i].io.in.data(), steps_[i].io.out.data());
    times_[i].seconds += std::chrono::duration<double>(clock::now() - t0).count();
    times_[i].layout_seconds += LayoutTimer::seconds() - layout0;
  }
  LayoutTimer::on() = false;
}

void Executor::run_observed() {
  // steps_ holds the non-view nodes in f_.nodes order.
  size_t k = 0;
  std::vector<const Tensor*> outs;
  for (const Node& n : f_.nodes) {
    if (k < steps_.size() && steps_[k].node == &n) {
      steps_[k].kernel->run(steps_[k].io.in.data(), steps_[k].io.out.data());
      ++k;
    }
    outs.clear();
    for (int v : n.outputs)
      outs.push_back(v >= 0 && plan_.live[v] && values_[v].data ? &values_[v] : nullptr);
    observer_(n, outs);
  }
}

}  // namespace ts

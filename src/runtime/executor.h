// Compiles one IR function for the CPU and runs it.
//
// compile (constructor): builds every node's kernel (ops precompute
// primitives and strides here) and places every value by a static memory
// plan (runtime/memory_plan.h): values whose lifetimes do not overlap share
// arena bytes. bind: function inputs point at caller-owned memory. run: calls
// the kernels in order and never allocates; a node none of whose outputs is
// read (only without cleanup) is compiled but not run.
//
// inplace: intermediates may be written over inputs that die at their node,
// and (with donate) new-state outputs the plan can donate are written
// straight into the memory bound to their state input (output(i).data then
// equals that pointer), so the caller's state buffers are overwritten by
// run(). Without donation, bound inputs are only read.

#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "ir/program.h"
#include "runtime/memory_plan.h"
#include "runtime/node_io.h"

namespace ts {

class Executor {
 public:
  // threads: the kernels' OpenMP threads; 0 takes the calling thread's
  // OpenMP default now, so every kernel is built for the count it runs with
  // (a kernel told 0 would plan for one thread).
  Executor(const Function& f, int threads, bool inplace = false);
  // With a plan made beforehand (plan_memory(f, ...)), e.g. to check its
  // size against a memory limit before anything is allocated; `collective`: the ranks a
  // data-parallel step's all-reduce nodes reduce over.
  Executor(const Function& f, int threads, MemoryPlan plan, Collective* collective = nullptr);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const Function& function() const { return f_; }
  int threads() const { return threads_; }  // as resolved: at least 1
  // Points function input `i` at `data` (must hold the input's type).
  void bind_input(int i, void* data);
  void run();

  // Per-node timing, off by default (the timed path does not allocate
  // either). Times accumulate over runs until reset.
  using NodeTime = ts::NodeTime;
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<NodeTime>& profile() const { return times_; }
  void reset_profile();
  // Debugging hook (`verify --trace`): while set, run() calls fn(node,
  // outputs) after every node in schedule order, views included, while
  // its outputs still hold their values (an output nobody reads is nullptr).
  // run() checks for it once, so the plain loop stays as it is. Outputs
  // are as stored: on an optimised function, activations plan_layouts
  // blocked are channel-blocked (the node's out_layouts attribute says so).
  using Observer = std::function<void(const Node&, const std::vector<const Tensor*>&)>;
  void set_observer(Observer fn) { observer_ = std::move(fn); }

  // After run(), only outputs are sure to hold their values: intermediates
  // whose lifetimes ended may have been overwritten (shared arena bytes).
  const Tensor& value(int id) const { return values_[id]; }
  const Tensor& output(int i) const { return values_[f_.outputs[i].value]; }
  size_t arena_bytes() const { return arena_.size(); }
  // The kernels that were picked by measurement (ops/kernel_choice.h), with
  // their nodes, in schedule order.
  std::vector<std::pair<const Node*, const KernelChoice*>> kernel_choices() const;
  const MemoryPlan& plan() const { return plan_; }

 private:
  void refresh();  // re-resolves data pointers after a bind
  void run_observed();

  struct Step {
    const Node* node;
    std::unique_ptr<Kernel> kernel;
    NodeIO io;
  };
  const Function& f_;
  int threads_;
  std::vector<Tensor> values_;
  MemoryPlan plan_;  // plan_.root: value -> value whose memory it shares (itself if none)
  std::vector<Step> steps_;
  Buffer arena_;
  bool dirty_ = true;
  bool profiling_ = false;
  std::vector<NodeTime> times_;  // one per step_, same order
  Observer observer_;
};

}  // namespace ts

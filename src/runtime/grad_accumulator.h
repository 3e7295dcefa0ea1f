// Gradient accumulation (Session::grad_step / apply_grads): one float32 or
// float64 accumulator per parameter grad_step differentiates. grad_step's
// gradients add in; apply_step reads the mean.
#pragma once
#include <map>
#include <string>

#include "ir/program.h"
#include "trainstep/collective.h"

namespace ts {

class BoundStep;

class GradAccumulator {
 public:
  GradAccumulator() = default;
  // Accumulators shaped like grad_fn's gradient outputs (none without one).
  explicit GradAccumulator(const Function* grad_fn);

  bool empty() const { return acc_.empty(); }
  // What the steps bind: apply_step's gradient inputs, grad_step's renewals.
  std::map<std::string, HostTensor>& tensors() { return acc_; }
  const Tensor* find(const std::string& param) const;
  size_t bytes() const { return bytes_; }

  // acc = g (first micro-batch) or acc += g, from grad_step's outputs.
  void add(const BoundStep& grad_step, bool first);
  // Sums the accumulators over the ranks (in place).
  void all_reduce(Collective& c);
  // acc /= n: the mean over n micro-batches (of every rank).
  void divide(double n);

 private:
  std::map<std::string, HostTensor> acc_;
  size_t bytes_ = 0;
};

}  // namespace ts

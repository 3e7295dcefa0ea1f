#include "runtime/grad_accumulator.h"

#include <cstring>
#include <vector>

#include "runtime/bound_step.h"

namespace ts {

namespace {

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

GradAccumulator::GradAccumulator(const Function* grad_fn) {
  if (!grad_fn) return;
  for (const Port& out : grad_fn->outputs) {
    if (out.role != Role::Grad) continue;
    acc_.emplace(out.state, HostTensor(out.type.dtype, out.type.shape));
    bytes_ += out.type.nbytes();
  }
}

const Tensor* GradAccumulator::find(const std::string& param) const {
  auto it = acc_.find(param);
  return it == acc_.end() ? nullptr : &it->second.view;
}

void GradAccumulator::add(const BoundStep& g, bool first) {
  for (auto& [out, acc] : g.grad_out()) {
    const Tensor& grad = g.output(out);
    if (acc->dtype == DType::F64)
      accumulate<double>(grad, *acc, first);
    else
      accumulate<float>(grad, *acc, first);
  }
}

void GradAccumulator::all_reduce(Collective& c) {
  std::vector<Collective::Request> reqs;
  for (auto& [name, acc] : acc_)
    reqs.push_back(c.all_reduce(acc.view.data, static_cast<size_t>(acc.view.numel()),
                                acc.view.dtype, ReduceOp::Sum, "the accumulated-gradient all-reduce"));
  for (auto r : reqs) c.wait(r);
}

void GradAccumulator::divide(double n) {
  for (auto& [name, acc] : acc_) {
    if (acc.view.dtype == DType::F64)
      scale<double>(acc.view, 1.0 / n);
    else
      scale<float>(acc.view, 1.0f / static_cast<float>(n));
  }
}

}  // namespace ts

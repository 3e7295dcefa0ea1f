#include "passes/const_eval.h"

#include <cmath>
#include <cstring>

#include "ops/broadcast.h"

namespace ts {

bool same_type(const TensorType& a, const TensorType& b) {
  return a == b && a.wrapped == b.wrapped;
}

const Node* producer_of(const Function& f, int v) {
  if (v < 0 || f.producer[v] < 0) return nullptr;
  const Node& n = f.nodes[f.producer[v]];
  return n.dead ? nullptr : &n;
}

HostTensor run_node(const Node& n, const std::vector<TensorType>& in_types,
                    const std::vector<const HostTensor*>& in, const TensorType& out) {
  std::vector<bool> present;
  std::vector<Tensor> ins;
  for (const HostTensor* t : in) {
    present.push_back(t != nullptr);
    ins.push_back(t ? t->view : Tensor{});
  }
  HostTensor r(out.dtype, out.shape);
  if (n.def->alias_input0) {  // a reshape: same bytes
    std::memcpy(r.view.data, in.at(0)->view.data, r.view.nbytes());
    return r;
  }
  NodeCtx ctx(n.name, n.op, n.attrs, in_types, present);
  std::vector<TensorType> outs = n.def->infer(ctx);
  KernelCtx kc{ctx, outs, 1};
  std::unique_ptr<Kernel> k = make_kernel(*n.def, kc);
  std::vector<HostTensor> held;  // buffers for outputs other than 0
  std::vector<Tensor> o;
  for (size_t j = 0; j < outs.size(); ++j) {
    if (j == 0) {
      o.push_back(r.view);
      continue;
    }
    held.emplace_back(outs[j].dtype, outs[j].shape);
    o.push_back(held.back().view);
  }
  k->run(ins.data(), o.data());
  return r;
}

std::optional<HostTensor> constant_tensor(const Function& f, int v) {
  const Node* n = producer_of(f, v);
  if (!n || def_of(*n).constant != ConstRole::Literal || !f.value_types[v].shape.empty()) return std::nullopt;
  return run_node(*n, {}, {}, f.value_types[v]);
}

std::optional<double> constant_value(const Function& f, int v) {
  std::optional<HostTensor> t = constant_tensor(f, v);
  if (!t) return std::nullopt;
  return read_as_double(t->view.data, t->view.dtype);
}

json constant_attrs(const HostTensor& t, bool wrapped) {
  json a = json::object();
  const DType dt = t.view.dtype;
  a["dtype"] = dtype_name(dt);
  if (dt == DType::Bool) {
    a["value"] = read_as_int(t.view.data, dt) != 0;
  } else if (dtype_is_int(dt)) {
    a["value"] = read_as_int(t.view.data, dt);
  } else {
    double d = read_as_double(t.view.data, dt);
    if (std::isnan(d)) a["value"] = "nan";
    else if (std::isinf(d)) a["value"] = d > 0 ? "inf" : "-inf";
    else a["value"] = d;
  }
  if (wrapped) a["wrapped"] = true;
  return a;
}

}  // namespace ts

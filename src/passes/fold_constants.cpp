// Constant folding: a node with one 0-d output whose inputs are all 0-d
// constants (or that reads no input data) becomes a trainstep.constant. The
// value comes from the op's own kernel, so semantics live in one place.
#include "passes/cleanup.h"
#include "passes/const_eval.h"

namespace ts {

void fold_constants(Function& f) {
  const OpDef* constant = OpRegistry::get().find("trainstep.constant");
  for (Node& n : f.nodes) {
    if (n.dead) continue;
    const OpDef& d = def_of(n);
    if (d.constant == ConstRole::Literal || d.random) continue;
    if (n.outputs.size() != 1 || n.outputs[0] < 0) continue;
    const TensorType& out = f.value_types[n.outputs[0]];
    if (!out.shape.empty()) continue;  // only 0-d results become constants
    std::vector<TensorType> types;
    std::vector<std::optional<HostTensor>> held;
    bool ok = true;
    for (int v : n.inputs) {
      types.push_back(v >= 0 ? f.value_types[v] : TensorType{});
      if (v < 0) held.emplace_back();
      else if (d.shape_only) held.emplace_back(HostTensor(types.back().dtype, types.back().shape));
      else if (!(held.emplace_back(constant_tensor(f, v)))) ok = false;
    }
    if (!ok) continue;
    std::vector<const HostTensor*> in;
    for (auto& h : held) in.push_back(h ? &*h : nullptr);
    HostTensor r = run_node(n, types, in, out);
    n.op = constant->name;
    n.def = constant;
    n.attrs = constant_attrs(r, out.wrapped);
    n.inputs.clear();
  }
}

}  // namespace ts

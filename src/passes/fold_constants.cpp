// Constant folding: a node with one 0-d output whose inputs are all 0-d
// constants (or that reads no input data) becomes a trainstep.constant. The
// value comes from the op's own kernel, so semantics live in one place.
#include <set>

#include "passes/cleanup.h"
#include "passes/const_eval.h"

namespace ts {

namespace {

// Ops that read only the shape/dtype of their input, never its data.
bool reads_no_data(const std::string& op) {
  static const std::set<std::string> ops = {
      "aten.new_full.default", "aten.new_zeros.default", "aten.new_ones.default",
      "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default"};
  return ops.count(op) > 0;
}

}  // namespace

void fold_constants(Function& f) {
  const OpDef* constant = OpRegistry::get().find("trainstep.constant");
  for (Node& n : f.nodes) {
    if (n.dead || n.op == "trainstep.constant" || n.op.rfind("trainstep.philox", 0) == 0) continue;
    if (n.outputs.size() != 1 || n.outputs[0] < 0) continue;
    const TensorType& out = f.value_types[n.outputs[0]];
    if (!out.shape.empty()) continue;  // only 0-d results become constants
    const bool shape_only = reads_no_data(n.op);
    std::vector<TensorType> types;
    std::vector<std::optional<HostTensor>> held;
    bool ok = true;
    for (int v : n.inputs) {
      types.push_back(v >= 0 ? f.value_types[v] : TensorType{});
      if (v < 0) held.emplace_back();
      else if (shape_only) held.emplace_back(HostTensor(types.back().dtype, types.back().shape));
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

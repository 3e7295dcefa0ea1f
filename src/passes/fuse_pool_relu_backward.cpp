#include "passes/fuse_pool_relu_backward.h"

#include "ir/rewrite.h"
#include "ops/pool.h"

namespace ts {

namespace {

bool is_zero_constant(const Function& f, int v) {
  const int p = f.producer[v];
  if (p < 0 || f.nodes[p].op != "trainstep.constant" || !f.value_types[v].shape.empty()) return false;
  const json& val = f.nodes[p].attrs.value("value", json());
  return val.is_number() && val.get<double>() == 0.0;
}

bool zero_number(const json& j) { return j.is_number() && j.get<double>() == 0.0; }

}  // namespace

void fuse_pool_relu_backward(Function& f) {
  auto readers = consumers(f);
  auto outs = output_values(f);
  auto only_reader = [&](int v, int node) {
    return v >= 0 && !outs[v] && readers[v].size() == 1 && readers[v][0] == node;
  };
  bool changed = false;
  for (int wi = 0; wi < static_cast<int>(f.nodes.size()); ++wi) {
    Node& w = f.nodes[wi];
    if (w.dead || w.op != "aten.where.self" || w.inputs.size() != 3 || w.outputs[0] < 0) continue;
    const int mask = w.inputs[0], zero = w.inputs[1], pv = w.inputs[2];
    if (mask < 0 || zero < 0 || pv < 0 || f.producer[mask] < 0 || f.producer[pv] < 0) continue;
    const int li = f.producer[mask], pi = f.producer[pv];
    Node& le = f.nodes[li];
    Node& pb = f.nodes[pi];
    if (le.op != "aten.le.Scalar" || pb.op != "aten.max_pool2d_with_indices_backward.default")
      continue;
    if (!zero_number(le.attrs.value("other", json())) || !is_zero_constant(f, zero)) continue;
    const int x = pb.inputs[1], idx = pb.inputs[2];
    if (le.inputs[0] != x || !only_reader(pv, wi) || f.producer[idx] < 0) continue;
    Node& fwd = f.nodes[f.producer[idx]];
    if (fwd.op != "aten.max_pool2d_with_indices.default" || fwd.inputs[0] != x ||
        fwd.attrs != pb.attrs || !only_reader(idx, pi))
      continue;
    const TensorType& xt = f.value_types[x];
    if (f.value_types[w.outputs[0]] != xt) continue;
    const NodeCtx ctx = node_ctx(f, fwd);
    if (!pool_detail::windows_tile(ctx, xt)) continue;
    int64_t kh, kw;
    ctx.attr_pair("kernel_size", kh, kw);
    if (kh * kw > 128) continue;

    const int code = add_value(f, fwd.name + ".code", {DType::U8, f.value_types[idx].shape});
    Node& fw = f.nodes[f.producer[idx]];  // add_value leaves nodes in place
    fw.op = "trainstep.max_pool2d_code";
    fw.def = nullptr;  // compact() re-resolves both
    fw.outputs[1] = code;
    fw.declared[1] = {DType::U8, f.value_types[idx].shape};
    Node& y = f.nodes[wi];
    y.op = "trainstep.max_pool2d_code_backward";
    y.def = nullptr;
    y.attrs = fw.attrs;
    y.attrs["input_size"] = {xt.shape[xt.shape.size() - 2], xt.shape[xt.shape.size() - 1]};
    y.inputs = {f.nodes[pi].inputs[0], code};
    f.nodes[pi].dead = true;
    if (only_reader(mask, wi)) f.nodes[li].dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

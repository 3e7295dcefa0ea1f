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

}  // namespace

void fuse_pool_relu_backward(Function& f) {
  auto readers = consumers(f);
  auto outs = output_values(f);
  bool changed = false;
  for (auto& w : f.nodes) {
    if (w.dead || w.op != "aten.where.self" || w.inputs.size() != 3 || w.outputs[0] < 0) continue;
    const int mask = w.inputs[0], zero = w.inputs[1], pv = w.inputs[2];
    if (mask < 0 || zero < 0 || pv < 0 || f.producer[mask] < 0 || f.producer[pv] < 0) continue;
    Node& le = f.nodes[f.producer[mask]];
    Node& pool = f.nodes[f.producer[pv]];
    if (le.op != "aten.le.Scalar" || pool.op != "aten.max_pool2d_with_indices_backward.default")
      continue;
    const json& other = le.attrs.value("other", json());
    if (!other.is_number() || other.get<double>() != 0.0 || !is_zero_constant(f, zero)) continue;
    const int x = pool.inputs[1];
    if (le.inputs[0] != x || outs[pv] || readers[pv].size() != 1) continue;
    if (f.value_types[w.outputs[0]] != f.value_types[x]) continue;
    if (!pool_detail::windows_tile(node_ctx(f, pool), f.value_types[x])) continue;
    w.op = "trainstep.max_pool2d_relu_backward";
    w.def = nullptr;  // compact() re-resolves it
    w.attrs = pool.attrs;
    w.inputs = {pool.inputs[0], x};
    pool.dead = true;
    if (!outs[mask] && readers[mask].size() == 1) le.dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

#include "passes/fuse_conv_relu.h"

#include "ir/rewrite.h"
#include "ops/conv_transpose.h"

namespace ts {

void fuse_conv_relu(Function& f) {
  auto readers = consumers(f);
  auto outs = output_values(f);
  bool changed = false;
  for (auto& n : f.nodes) {
    if (n.dead || def_of(n).fuse_role != FuseRole::Conv || n.outputs[0] < 0) continue;
    if (!conv_takes_blocked_relu(n.attrs)) continue;  // transposed: no fused form
    int v = n.outputs[0];
    if (outs[v] || readers[v].size() != 1) continue;
    Node& r = f.nodes[readers[v][0]];
    if (def_of(r).fuse_role != FuseRole::Relu || r.inputs.size() != 1) continue;
    // The convolution node now produces relu's value; relu goes away.
    n.op = def_of(n).relu_fused;
    n.def = nullptr;  // compact() re-resolves it
    n.outputs[0] = r.outputs[0];
    n.declared = r.declared;
    r.dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

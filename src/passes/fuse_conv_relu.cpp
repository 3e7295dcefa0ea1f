#include "passes/fuse_conv_relu.h"

#include "ir/rewrite.h"
#include "ops/conv_transpose.h"

namespace ts {

void fuse_conv_relu(Function& f) {
  auto readers = consumers(f);
  auto outs = output_values(f);
  bool changed = false;
  for (auto& n : f.nodes) {
    if (n.dead || n.op != "aten.convolution.default" || n.outputs[0] < 0) continue;
    if (!conv_takes_blocked_relu(n.attrs)) continue;  // transposed: no fused form
    int v = n.outputs[0];
    if (outs[v] || readers[v].size() != 1) continue;
    Node& r = f.nodes[readers[v][0]];
    if (r.op != "aten.relu.default" || r.inputs.size() != 1) continue;
    // The convolution node now produces relu's value; relu goes away.
    n.op = "trainstep.conv2d_relu";
    n.def = nullptr;  // compact() re-resolves it
    n.outputs[0] = r.outputs[0];
    n.declared = r.declared;
    r.dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

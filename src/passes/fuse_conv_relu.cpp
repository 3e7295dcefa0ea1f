#include "passes/fuse_conv_relu.h"

#include "ir/rewrite.h"
#include "ops/conv_transpose.h"

namespace ts {

namespace {

// The node's output 0 may take a relu: a convolution with a fused form
// (not transposed), or a batch norm (its saves stay as they are).
bool takes_relu(const Node& n) {
  switch (def_of(n).fuse_role) {
    case FuseRole::Conv: return conv_takes_blocked_relu(n.attrs);
    case FuseRole::BatchNorm: return true;
    default: return false;
  }
}

}  // namespace

void fuse_conv_relu(Function& f) {
  auto readers = consumers(f);
  auto outs = output_values(f);
  bool changed = false;
  for (auto& n : f.nodes) {
    if (n.dead || n.outputs.empty() || n.outputs[0] < 0 || !takes_relu(n)) continue;
    // Only output 0 becomes relu's: its pre-relu value must have no other
    // use. Other outputs (batch norm's saves) may have any readers.
    int v = n.outputs[0];
    if (outs[v] || readers[v].size() != 1) continue;
    Node& r = f.nodes[readers[v][0]];
    if (def_of(r).fuse_role != FuseRole::Relu || r.inputs.size() != 1) continue;
    // The node now produces relu's value; relu goes away.
    n.op = def_of(n).relu_fused;
    n.def = nullptr;  // compact() re-resolves it
    n.outputs[0] = r.outputs[0];
    n.declared[0] = r.declared[0];
    r.dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

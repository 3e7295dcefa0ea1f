#include "passes/compose_views.h"

#include "ir/rewrite.h"
#include "ops/shape.h"
#include "passes/cleanup.h"

namespace ts {

namespace {

constexpr const char* kAsStrided = opname::as_strided;
constexpr const char* kView = opname::view;

// A value as a strided view of an earlier value (`root`, a real buffer),
// and how many copies made it from there.
struct Chain {
  int root = -1;  // -1: the value is its own root
  StridedView view;
  int copies = 0;
};

}  // namespace

void compose_views(Function& f) {
  std::vector<Chain> chain(f.value_types.size());
  // A copy of a function input that is itself an output stays a copy: the
  // signature's outputs are buffers of their own.
  const std::vector<bool> outputs = output_values(f);
  bool changed = false;
  // Nodes are in execution order: a chain's earlier links are seen first.
  for (Node& n : f.nodes) {
    if (n.dead || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0)
      continue;
    const OpDef& d = def_of(n);
    if (!d.strided_view) continue;
    const int x = n.inputs[0], y = n.outputs[0];
    const TensorType& yt = f.value_types[y];
    Chain in = chain[x];
    if (in.root < 0) in = {x, contiguous_view(f.value_types[x].shape), 0};
    if (f.value_types[in.root].dtype != yt.dtype) continue;
    std::optional<StridedView> v = d.strided_view(node_ctx(f, n), in.view, yt.shape);
    if (!v) continue;  // y starts a chain of its own
    Chain& c = chain[y];
    c = {in.root, std::move(*v), in.copies + (d.alias_input0 ? 0 : 1)};
    if (d.alias_input0) continue;
    if (c.view.offset == 0 && is_contiguous(c.view) &&
        shape_numel(c.view.size) == f.value_types[c.root].numel() &&
        !(f.producer[c.root] < 0 && outputs[y])) {
      // The root's own elements in order (an expand or clone to the same
      // shape): no copy at all. Under another shape (a clone of a view):
      // a view of the root, which aliases it.
      if (c.view.size == f.value_types[c.root].shape) {
        replace_uses(f, y, c.root);
        n.dead = true;
      } else {
        n.op = kView;
        n.def = nullptr;
        n.inputs = {c.root};
        n.attrs = {{"size", yt.shape}};
        chain[y] = {c.root, c.view, 0};
      }
      changed = true;
      continue;
    }
    if (c.copies < 2) continue;
    n.op = kAsStrided;
    n.def = nullptr;  // compact() re-resolves it
    n.inputs = {c.root};
    n.attrs = {{"size", c.view.size}, {"stride", c.view.stride}, {"storage_offset", c.view.offset}};
    c.copies = 1;
    changed = true;
  }
  if (!changed) return;
  dce(f);  // the copies the composed ones replaced, where nothing else reads them
  compact(f);
}

}  // namespace ts

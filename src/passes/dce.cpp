// Dead code elimination: one backward sweep. Every op is pure (state flows
// through the signature), so a node nobody reads can go; collectives are
// not (every rank must run each one), so they stay.
#include "ir/rewrite.h"
#include "ops/op.h"
#include "passes/cleanup.h"

namespace ts {

void dce(Function& f) {
  std::vector<bool> live = output_values(f);
  for (size_t i = f.nodes.size(); i-- > 0;) {
    Node& n = f.nodes[i];
    if (n.dead) continue;
    bool any = false;
    for (int& v : n.outputs) {
      if (v >= 0 && live[v]) any = true;
      else v = -1;  // nobody reads it: the kernel may skip it
    }
    if (!any && def_of(n).comm == CommRole::None) {
      n.dead = true;
      continue;
    }
    for (int v : n.inputs)
      if (v >= 0) live[v] = true;
  }
}

}  // namespace ts

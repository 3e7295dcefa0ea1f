// Dead code elimination: one backward sweep. Every op is pure (state flows
// through the signature), so a node nobody reads can go.
#include "ir/rewrite.h"
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
    if (!any) {
      n.dead = true;
      continue;
    }
    for (int v : n.inputs)
      if (v >= 0) live[v] = true;
  }
}

}  // namespace ts

// Common subexpression elimination in one forward sweep: a node whose
// (op, inputs, attrs) was seen before reuses the earlier node's outputs.
#include <unordered_map>

#include "passes/cleanup.h"

namespace ts {

void cse(Function& f) {
  std::vector<int> repl(f.value_names.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = static_cast<int>(v);
  std::unordered_map<std::string, int> seen;  // key -> node index
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    Node& n = f.nodes[i];
    if (n.dead) continue;
    for (int& v : n.inputs)
      if (v >= 0) v = repl[v];
    // Random ops are keyed by attrs, but never assume two draws are one.
    if (def_of(n).random) continue;
    // dump() tells 1 from 1.0 (json's == does not): their dtypes differ.
    std::string key = n.op + '\n' + n.attrs.dump() + '\n';
    for (int v : n.inputs) key += std::to_string(v) + ',';
    auto [it, fresh] = seen.emplace(key, static_cast<int>(i));
    if (fresh) continue;
    Node& first = f.nodes[it->second];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int v = n.outputs[k];
      if (v < 0) continue;
      if (first.outputs[k] >= 0) {
        repl[v] = first.outputs[k];
      } else {  // the first node dropped this output: it defines v now
        first.outputs[k] = v;
        f.producer[v] = it->second;
        n.outputs[k] = -1;
      }
    }
    n.dead = true;
  }
  for (auto& p : f.outputs) p.value = repl[p.value];
}

}  // namespace ts

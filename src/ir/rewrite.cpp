#include "ir/rewrite.h"

namespace ts {

std::vector<std::vector<int>> consumers(const Function& f) {
  std::vector<std::vector<int>> c(f.value_names.size());
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    if (f.nodes[i].dead) continue;
    for (int v : f.nodes[i].inputs)
      if (v >= 0 && (c[v].empty() || c[v].back() != int(i))) c[v].push_back(int(i));
  }
  return c;
}

std::vector<bool> output_values(const Function& f) {
  std::vector<bool> r(f.value_names.size(), false);
  for (const auto& p : f.outputs) r[p.value] = true;
  return r;
}

void replace_uses(Function& f, int from, int to) {
  for (auto& n : f.nodes)
    for (int& v : n.inputs)
      if (v == from) v = to;
  for (auto& p : f.outputs)
    if (p.value == from) p.value = to;
}

int add_value(Function& f, const std::string& name, const TensorType& t) {
  f.value_names.push_back(name);
  f.value_types.push_back(t);
  f.producer.push_back(-1);
  return static_cast<int>(f.value_names.size()) - 1;
}

void compact(Function& f) {
  const size_t nv = f.value_names.size();
  std::vector<bool> keep(nv, false);
  for (const auto& p : f.inputs) keep[p.value] = true;
  for (const auto& n : f.nodes) {
    if (n.dead) continue;
    for (int v : n.inputs)
      if (v >= 0) keep[v] = true;
    for (int v : n.outputs)
      if (v >= 0) keep[v] = true;
  }
  for (const auto& p : f.outputs) keep[p.value] = true;
  std::vector<int> remap(nv, -1);
  Function g;
  g.name = f.name;
  for (size_t v = 0; v < nv; ++v) {
    if (!keep[v]) continue;
    remap[v] = static_cast<int>(g.value_names.size());
    g.value_names.push_back(f.value_names[v]);
    g.value_types.push_back(f.value_types[v]);
    g.producer.push_back(-1);
  }
  auto map = [&](int v) { return v < 0 ? -1 : remap[v]; };
  for (auto& p : f.inputs) {
    Port q = p;
    q.value = map(p.value);
    g.inputs.push_back(q);
  }
  for (auto& n : f.nodes) {
    if (n.dead) continue;
    Node m = std::move(n);
    for (int& v : m.inputs) v = map(v);
    for (int& v : m.outputs) {
      v = map(v);
      if (v >= 0) g.producer[v] = static_cast<int>(g.nodes.size());
    }
    g.nodes.push_back(std::move(m));
  }
  for (auto& p : f.outputs) {
    Port q = p;
    q.value = map(p.value);
    g.outputs.push_back(q);
  }
  f = std::move(g);
  verify_function(f, "after a compiler pass");
}

std::vector<bool> values_reaching(const Function& f, const std::vector<int>& roots) {
  std::vector<bool> seen(f.value_names.size(), false);
  std::vector<int> todo = roots;
  while (!todo.empty()) {
    const int v = todo.back();
    todo.pop_back();
    if (v < 0 || seen[v]) continue;
    seen[v] = true;
    if (const int n = f.producer[v]; n >= 0)
      for (int u : f.nodes[n].inputs) todo.push_back(u);
  }
  return seen;
}

void copy_nodes(const Function& src, const std::vector<bool>& need, Function& dst,
                std::vector<int>& map) {
  for (size_t i = 0; i < src.nodes.size(); ++i) {
    if (!need[i]) continue;
    Node m = src.nodes[i];
    for (int& v : m.inputs) v = v < 0 ? -1 : map[v];
    for (int& v : m.outputs)
      if (v >= 0) v = map[v] = add_value(dst, src.value_names[v], src.value_types[v]);
    dst.nodes.push_back(std::move(m));
  }
}

}  // namespace ts

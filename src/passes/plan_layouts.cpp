#include "passes/plan_layouts.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

namespace {

// The node's blocked-layout capabilities (OpDef::layouts), if this node
// qualifies (a transposed convolution does not).
const LayoutCaps* caps(const Node& n) {
  if (!n.def || !n.def->layouts) return nullptr;
  const LayoutCaps& c = *n.def->layouts;
  return !c.applies || c.applies(n.attrs) ? &c : nullptr;
}

// Does the node's kernel read or write this port blocked itself?
bool blocks(const Node& n, PortRef port) {
  const LayoutCaps* c = caps(n);
  if (!c) return false;
  for (const PortRef& p : c->blocked)
    if (p.output == port.output && p.index == port.index) return true;
  const int from = port.output ? c->blocked_outputs_from : c->blocked_inputs_from;
  return from >= 0 && port.index >= from;
}

int value_at(const Node& n, PortRef p) {
  const std::vector<int>& vs = p.output ? n.outputs : n.inputs;
  return p.index < static_cast<int>(vs.size()) ? vs[p.index] : -1;
}

// A pointwise node whose every tensor has one shape (or one element) reads
// and writes element i at the same offset in any layout, so its tensors
// may take any layout, as long as it is the same for all of them.
bool layout_agnostic(const Function& f, const Node& n) {
  if (!n.def || !n.def->same_index) return false;
  const Shape* shape = nullptr;
  auto fits = [&](int v) {
    if (v < 0) return true;
    const Shape& s = f.value_types[v].shape;
    if (shape_numel(s) == 1) return true;
    if (!shape) shape = &s;
    return s == *shape;
  };
  for (int v : n.inputs)
    if (!fits(v)) return false;
  for (int v : n.outputs)
    if (!fits(v)) return false;
  return shape != nullptr;
}

struct Sets {
  std::vector<int> parent;
  explicit Sets(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int v) {  // iterative, with path halving: no deep recursion on long chains
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

void set_layout(Node& n, const char* key, int port, int ports, const char* name) {
  json& a = n.attrs[key];
  if (!a.is_array()) a = json::array();
  while (static_cast<int>(a.size()) < ports) a.push_back("plain");
  a[port] = name;
}

}  // namespace

void plan_layouts(Function& f, int64_t block, bool channels_last) {
  const Layout blocked_layout = layout_from_block(block);
  const int nv = static_cast<int>(f.value_types.size());
  auto is_big = [&](int v) { return shape_numel(f.value_types[v].shape) != 1; };

  // Values that must share a layout: the tensors of a layout-agnostic node,
  // and the ports an op's LayoutCaps::same groups.
  Sets sets(nv);
  std::vector<bool> agnostic(f.nodes.size(), false);
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    const Node& n = f.nodes[k];
    if (n.dead) continue;
    if (layout_agnostic(f, n)) {
      agnostic[k] = true;
      int first = -1;
      for (const std::vector<int>* vs : {&n.inputs, &n.outputs})
        for (int v : *vs) {
          if (v < 0 || !is_big(v)) continue;
          if (first < 0) first = v;
          sets.join(v, first);
        }
    }
    if (const LayoutCaps* c = caps(n))
      for (size_t g = 0; g < c->same.size(); ++g) {
        std::vector<int> vs;
        for (const PortRef& p : c->same[g]) vs.push_back(value_at(n, p));
        // The variable tails join the first group; their one-element
        // values take no layout.
        if (g == 0) {
          for (const auto& [tail, from] : {std::pair{&n.inputs, c->blocked_inputs_from},
                                           std::pair{&n.outputs, c->blocked_outputs_from}})
            for (int i = std::max(from, 0); from >= 0 && i < static_cast<int>(tail->size()); ++i)
              if ((*tail)[i] >= 0 && is_big((*tail)[i])) vs.push_back((*tail)[i]);
        }
        int first = -1;
        for (int v : vs) {
          if (v < 0) continue;
          if (first < 0) first = v;
          sets.join(v, first);
        }
      }
  }

  // Each set's layout: blocked for float32 values, channels-last for
  // bfloat16 ones; a set holding both (or float64) stays plain. Masks
  // (bool) take their set's layout.
  std::vector<Layout> want(nv, Layout::Plain);
  std::vector<char> seen(nv, 0);
  std::vector<char> ok(nv, 1), gains(nv, 0);
  for (int v = 0; v < nv; ++v) {
    const int s = sets.find(v);
    const DType dt = f.value_types[v].dtype;
    if (!is_big(v) || dt == DType::Bool) continue;
    const Layout l = dt == DType::F32 ? blocked_layout
                     : dt == DType::BF16 && channels_last ? Layout::ChannelsLast
                                                          : Layout::Plain;
    if (!seen[s]) want[s] = l, seen[s] = 1;
    else if (want[s] != l) ok[s] = 0;
  }
  // A set is laid out so when each of its values can be (rank 4, made
  // inside the function and not returned; blocked: channels a multiple of
  // the block) and each port touching it is a layout-agnostic node's or a
  // kernel's that reads or writes that layout itself; and some kernel gains
  // from it (a set of pointwise nodes alone would only move the reorders).
  auto outs = output_values(f);
  for (int v = 0; v < nv; ++v) {
    const TensorType& t = f.value_types[v];
    const int s = sets.find(v);
    if (want[s] == Layout::Plain || outs[v] || f.producer[v] < 0 || t.shape.size() != 4 ||
        (want[s] != Layout::ChannelsLast && t.shape[1] % block != 0))
      ok[s] = 0;
  }
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    const Node& n = f.nodes[k];
    if (n.dead) continue;
    // A port of this node holds value v; `blocking`: its kernel reads or
    // writes it in the set's layout.
    auto touch = [&](int v, bool blocking) {
      if (v < 0 || (agnostic[k] && !is_big(v))) return;
      const int s = sets.find(v);
      if (blocking && want[s] == Layout::ChannelsLast && !caps(n)->channels_last) blocking = false;
      if (blocking)
        gains[s] = 1;
      else if (!agnostic[k])
        ok[s] = 0;
    };
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) touch(n.inputs[i], blocks(n, in_port(i)));
    for (int j = 0; j < static_cast<int>(n.outputs.size()); ++j) touch(n.outputs[j], blocks(n, out_port(j)));
  }
  std::vector<Layout> layout(nv, Layout::Plain);
  bool any = false;
  for (int v = 0; v < nv; ++v) {
    const int s = sets.find(v);
    if (ok[s] && gains[s]) layout[v] = want[s], any = true;
  }
  if (!any) return;
  // Pointwise nodes get no attribute: they work in any layout.
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    Node& n = f.nodes[k];
    if (n.dead || agnostic[k]) continue;
    const int ni = static_cast<int>(n.inputs.size()), no = static_cast<int>(n.outputs.size());
    for (int i = 0; i < ni; ++i)
      if (n.inputs[i] >= 0 && layout[n.inputs[i]] != Layout::Plain)
        set_layout(n, "in_layouts", i, ni, layout_name(layout[n.inputs[i]]));
    for (int j = 0; j < no; ++j)
      if (n.outputs[j] >= 0 && layout[n.outputs[j]] != Layout::Plain)
        set_layout(n, "out_layouts", j, no, layout_name(layout[n.outputs[j]]));
  }
  compact(f);  // re-verifies: each node checks its layouts against its types
}

}  // namespace ts

#include "passes/fuse_batch_norm_groups.h"

#include <algorithm>

#include "ir/rewrite.h"

namespace ts {

namespace {

constexpr int kFwdBnInputs = 5;  // x, weight, bias, running_mean, running_var
constexpr int kBwdBnInputs = 7;  // grad_out, x, weight, running stats, saves

bool is_group(const Node& n) { return def_of(n).fuse_role == FuseRole::ElementwiseGroup; }

// The group's members with its input refs renumbered for the fused node:
// the input holding y becomes group input 0, the others 1.. in order
// (appended to `extra`, the values the fused node takes after its own).
json renumber(const Node& group, int y, std::vector<int>& extra) {
  std::vector<int> to(group.inputs.size());
  for (size_t j = 0; j < group.inputs.size(); ++j) {
    if (group.inputs[j] == y) {
      to[j] = 0;
    } else {
      to[j] = 1 + static_cast<int>(extra.size());
      extra.push_back(group.inputs[j]);
    }
  }
  json members = group.attrs.at("members");
  for (json& m : members)
    for (json& a : m.at("args"))
      if (a.at(0) == "in") a[1] = to.at(a.at(1).get<size_t>());
  return members;
}

// The batch norm backward that is the only reader of the group's one
// output, as its grad_out, over the same x; -1 if none.
int backward_of(const Function& f, const std::vector<std::vector<int>>& readers,
                const std::vector<bool>& outs, const Node& group, int x) {
  if (group.outputs.size() != 1 || group.outputs[0] < 0 || outs[group.outputs[0]]) return -1;
  const int g = group.outputs[0];
  if (readers[g].size() != 1) return -1;
  const int q = readers[g][0];
  const Node& b = f.nodes[q];
  if (def_of(b).fuse_role != FuseRole::BatchNormBackward || !def_of(b).group_fused) return -1;
  if (b.inputs.size() != kBwdBnInputs || b.inputs[0] != g || b.inputs[1] != x) return -1;
  for (size_t i = 1; i < b.inputs.size(); ++i)
    if (b.inputs[i] == g) return -1;
  return q;
}

// Can the group run where the batch norm at index `at` runs: every input
// but y is one element, made before it?
bool runs_at(const Function& f, const Node& group, int y, int at) {
  for (int v : group.inputs)
    if (v != y && (v < 0 || f.value_types[v].numel() != 1 || f.producer[v] >= at)) return false;
  return true;
}

}  // namespace

void fuse_batch_norm_groups(Function& f) {
  const auto readers = consumers(f);
  const auto outs = output_values(f);
  bool changed = false;
  const int nn = static_cast<int>(f.nodes.size());
  for (int i = 0; i < nn; ++i) {
    Node& n = f.nodes[i];
    if (n.dead || def_of(n).fuse_role != FuseRole::BatchNorm || !def_of(n).group_fused) continue;
    if (n.inputs.size() != kFwdBnInputs || n.outputs.size() != 3) continue;
    const int x = n.inputs[0], y = n.outputs[0];
    if (x < 0 || y < 0 || outs[y] || f.value_types[x].dtype != DType::F32) continue;
    // Every reader of y is the forward group or a backward one; else y
    // must exist and nothing folds.
    int fwd = -1;
    std::vector<std::pair<int, int>> bwd;  // (group, batch norm backward)
    std::vector<int> rs = readers[y];
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());  // in order: a node reading y twice
    bool ok = !rs.empty();
    for (int r : rs) {
      const Node& g = f.nodes[r];
      if (!ok || !is_group(g) || g.dead) {
        ok = false;
        break;
      }
      const int q = backward_of(f, readers, outs, g, x);
      if (q >= 0) bwd.push_back({r, q});
      else if (fwd < 0 && runs_at(f, g, y, i)) fwd = r;
      else ok = false;
    }
    if (!ok || fwd < 0) continue;

    // The forward: batch norm's inputs, then the group's others; outputs
    // coeffs, the saves, then the group's.
    const int64_t C = f.value_types[x].shape.at(1);
    const TensorType coeffs_t{DType::F32, {2, C}};
    const int coeffs = add_value(f, n.name + ".coeffs", coeffs_t);
    Node& g = f.nodes[fwd];
    std::vector<int> extra;
    json attrs = n.attrs;
    attrs["members"] = renumber(g, y, extra);
    attrs["outputs"] = g.attrs.at("outputs");
    Node e;
    e.name = n.name;
    e.op = def_of(n).group_fused;
    e.attrs = std::move(attrs);
    e.inputs = n.inputs;
    e.inputs.insert(e.inputs.end(), extra.begin(), extra.end());
    e.outputs = {coeffs, n.outputs[1], n.outputs[2]};
    e.declared = {coeffs_t, n.declared.at(1), n.declared.at(2)};
    e.outputs.insert(e.outputs.end(), g.outputs.begin(), g.outputs.end());
    e.declared.insert(e.declared.end(), g.declared.begin(), g.declared.end());
    e.source = n.source;
    g.dead = true;
    // Each backward: coeffs, its inputs less grad_out, the group's others.
    for (auto [r, q] : bwd) {
      Node& bg = f.nodes[r];
      Node& b = f.nodes[q];
      std::vector<int> more;
      b.attrs["members"] = renumber(bg, y, more);
      b.attrs["outputs"] = bg.attrs.at("outputs");
      std::vector<int> in = {coeffs};
      in.insert(in.end(), b.inputs.begin() + 1, b.inputs.end());
      in.insert(in.end(), more.begin(), more.end());
      b.inputs = std::move(in);
      b.op = def_of(b).group_fused;
      b.def = nullptr;  // compact() re-resolves it
      bg.dead = true;
    }
    f.nodes[i] = std::move(e);
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

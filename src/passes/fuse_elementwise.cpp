#include "passes/fuse_elementwise.h"

#include <algorithm>
#include <map>
#include <memory>

#include "ir/rewrite.h"
#include "ops/bf16_kernel.h"

namespace ts {

namespace {

// A one-element constant the fused kernel takes as an immediate.
bool is_const_node(const Function& f, const Node& n) {
  return def_of(n).constant != ConstRole::None && n.inputs.empty() &&
         n.outputs.size() == 1 && n.outputs[0] >= 0 && f.value_types[n.outputs[0]].numel() == 1;
}

bool tile_dtype(DType t) { return t == DType::F32 || t == DType::Bool || t == DType::BF16; }

// A pointwise node the fused kernel can run: one output, float32/bfloat16/
// bool, a tile form for its float32 twin's types, every operand the
// output's shape (float32/bfloat16/bool) or one element.
bool is_fusable(const Function& f, const Node& n) {
  if (!n.def || !n.def->make_tile || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const TensorType& out = f.value_types[n.outputs[0]];
  if (!tile_dtype(out.dtype)) return false;
  std::vector<TensorType> in;
  for (int v : n.inputs) {
    if (v < 0) return false;
    const TensorType& t = f.value_types[v];
    if (t.numel() != 1 && (t.shape != out.shape || !tile_dtype(t.dtype))) return false;
    in.push_back(float32_type(t));
  }
  const json attrs = float32_attrs(n.attrs);
  NodeCtx ctx(n.name, n.op, attrs, in, std::vector<bool>(in.size(), true));
  return n.def->make_tile(ctx) != nullptr;
}

}  // namespace

void fuse_elementwise(Function& f) {
  const int nn = static_cast<int>(f.nodes.size());
  const auto cons = consumers(f);
  const auto is_out = output_values(f);
  std::vector<char> fusable(nn, 0), cst(nn, 0);
  for (int i = 0; i < nn; ++i) {
    const Node& n = f.nodes[i];
    if (n.dead) continue;
    if (is_const_node(f, n)) cst[i] = 1;
    else fusable[i] = is_fusable(f, n);
  }

  // Greedy grouping in execution order: a node joins the groups of its
  // fusable producers (all of them if it can, else the largest it can).
  std::vector<int> gid(nn, -1);
  std::vector<std::vector<int>> groups;
  auto can_join = [&](const std::vector<int>& gs, int i) {
    for (int g : gs)
      for (int m : groups[g])
        for (int c : cons[f.nodes[m].outputs[0]]) {
          if (c == i || c > i) continue;
          if (std::find(gs.begin(), gs.end(), gid[c]) == gs.end()) return false;
        }
    return true;
  };
  for (int i = 0; i < nn; ++i) {
    if (!fusable[i]) continue;
    const Shape& shape = f.value_types[f.nodes[i].outputs[0]].shape;
    std::vector<int> cand;
    for (int v : f.nodes[i].inputs) {
      const int p = f.producer[v];
      if (p < 0 || gid[p] < 0) continue;
      if (f.value_types[f.nodes[p].outputs[0]].shape != shape) continue;
      if (std::find(cand.begin(), cand.end(), gid[p]) == cand.end()) cand.push_back(gid[p]);
    }
    std::vector<int> join;
    if (!cand.empty() && can_join(cand, i)) {
      join = cand;
    } else {
      std::sort(cand.begin(), cand.end(),
                [&](int a, int b) { return groups[a].size() > groups[b].size(); });
      for (int g : cand)
        if (can_join({g}, i)) {
          join = {g};
          break;
        }
    }
    if (join.empty()) {
      gid[i] = static_cast<int>(groups.size());
      groups.push_back({i});
      continue;
    }
    const int g0 = join[0];
    for (size_t k = 1; k < join.size(); ++k) {
      for (int m : groups[join[k]]) {
        gid[m] = g0;
        groups[g0].push_back(m);
      }
      groups[join[k]].clear();
    }
    gid[i] = g0;
    groups[g0].push_back(i);
  }

  // Rewrite each group of two or more into one node at its last member. A
  // lone node that touches bfloat16 is rewritten too: the fused kernel
  // converts tile by tile in cache, where its own kernel would run the
  // float32 twin between whole-tensor conversions.
  auto touches_bf16 = [&](const Node& n) {
    for (int v : n.inputs)
      if (f.value_types[v].dtype == DType::BF16) return true;
    return f.value_types[n.outputs[0]].dtype == DType::BF16;
  };
  std::vector<int> folded;  // constant nodes folded into some group
  bool rewrote = false;
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    std::vector<int> mem = groups[g];
    if (mem.empty() || (mem.size() < 2 && !touches_bf16(f.nodes[mem[0]]))) continue;
    rewrote = true;
    std::sort(mem.begin(), mem.end());
    json members = json::array();
    std::map<int, int> member_of;  // value -> member index
    std::map<int, int> input_of;   // value -> node input index
    std::vector<int> inputs;
    // Constants first, so members can refer to them.
    for (int m : mem)
      for (int v : f.nodes[m].inputs) {
        const int p = f.producer[v];
        if (p < 0 || !cst[p] || member_of.count(v)) continue;
        const Node& c = f.nodes[p];
        member_of[v] = static_cast<int>(members.size());
        members.push_back({{"name", c.name}, {"op", c.op}, {"attrs", c.attrs}, {"args", json::array()}});
        folded.push_back(p);
      }
    for (int m : mem) {
      const Node& n = f.nodes[m];
      json args = json::array();
      for (int v : n.inputs) {
        auto it = member_of.find(v);
        if (it != member_of.end()) {
          args.push_back({"m", it->second});
          continue;
        }
        auto jt = input_of.find(v);
        if (jt == input_of.end()) {
          jt = input_of.emplace(v, static_cast<int>(inputs.size())).first;
          inputs.push_back(v);
        }
        args.push_back({"in", jt->second});
      }
      member_of[n.outputs[0]] = static_cast<int>(members.size());
      members.push_back({{"name", n.name}, {"op", n.op}, {"attrs", n.attrs}, {"args", args}});
    }
    // Outputs: member values read outside the group or by the function.
    Node fused;
    json outs = json::array();
    for (int m : mem) {
      const int v = f.nodes[m].outputs[0];
      bool outside = is_out[v];
      for (int c : cons[v]) outside = outside || gid[c] != g;
      if (!outside) continue;
      outs.push_back(member_of[v]);
      fused.outputs.push_back(v);
      const TensorType& t = f.value_types[v];
      fused.declared.push_back({t.dtype, t.shape});
    }
    const int last = mem.back();
    fused.name = "fused_" + f.nodes[last].name;
    fused.op = "trainstep.fused_elementwise";
    fused.attrs = {{"members", members}, {"outputs", outs}};
    fused.inputs = inputs;
    for (int m : mem) f.nodes[m].dead = true;
    f.nodes[last] = std::move(fused);
  }
  if (!rewrote) return;
  // Folded constants nobody reads any more go.
  const auto cons2 = consumers(f);
  for (int p : folded) {
    const int v = f.nodes[p].outputs[0];
    if (!f.nodes[p].dead && cons2[v].empty() && !is_out[v]) f.nodes[p].dead = true;
  }
  compact(f);
}

}  // namespace ts

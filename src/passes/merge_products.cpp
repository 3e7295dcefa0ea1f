#include "passes/merge_products.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "ir/rewrite.h"
#include "ops/elementwise_binary.h"
#include "ops/shape.h"
#include "passes/products.h"

namespace ts {
namespace {

// The ops the rewrite writes (FuseRole MatMulT and Add, and a concatenation).
const char* const kMatmul = "trainstep.matmul";
const char* const kAdd = opname::add;
const char* const kCat = opname::cat;

struct Merger {
  Function& f;
  std::vector<std::vector<int>> readers = consumers(f);
  std::vector<bool> outs = output_values(f);

  bool only_reader(int v, int node) const {
    return v >= 0 && !outs[v] && readers[v].size() == 1 && readers[v][0] == node;
  }

  // A plain sum: self + 1 * other, all three of one type.
  bool is_sum(const Node& n) const {
    if (n.dead || def_of(n).fuse_role != FuseRole::Add || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        n.outputs[0] < 0 || n.inputs[0] < 0 || n.inputs[1] < 0)
      return false;
    const json alpha = n.attrs.value("alpha", json(1));
    if (!alpha.is_number() || alpha.get<double>() != 1.0) return false;
    const TensorType& t = f.value_types[n.outputs[0]];
    return f.value_types[n.inputs[0]] == t && f.value_types[n.inputs[1]] == t;
  }

  // The summed values under sum node `n`, each with the sum reading it
  // (inner sums read only by their parent expand).
  struct Leaf {
    int value, reader;
  };
  void leaves(int n, std::vector<int>& sums, std::vector<Leaf>& out) const {
    sums.push_back(n);
    for (int v : f.nodes[n].inputs) {
      const int p = f.producer[v];
      if (p >= 0 && is_sum(f.nodes[p]) && only_reader(v, n))
        leaves(p, sums, out);
      else
        out.push_back({v, n});
    }
  }

  // The product making leaf v, if it can merge: rank 2, read only by sum node `reader`.
  int product(int v, int reader) const {
    const int p = f.producer[v];
    if (p < 0 || !only_reader(v, reader)) return -1;
    const Node& n = f.nodes[p];
    if (n.dead || !is_product(n) || n.inputs.size() != 2) return -1;
    for (int u : n.inputs)
      if (u < 0 || f.value_types[u].shape.size() != 2) return -1;
    return p;
  }

  // Rewrites the tree rooted at sum node `root`; false if it has nothing to merge.
  bool merge(int root) {
    std::vector<int> sums;
    std::vector<Leaf> vals;
    leaves(root, sums, vals);
    if (vals.size() < 2) return false;
    // Group the product leaves by (trans_a, trans_b, dtype); the largest merges.
    std::map<std::tuple<bool, bool, int>, std::vector<int>> groups;
    for (size_t i = 0; i < vals.size(); ++i) {
      const int p = product(vals[i].value, vals[i].reader);
      if (p < 0) continue;
      const Node& n = f.nodes[p];
      groups[{product_flag(n, "trans_a"), product_flag(n, "trans_b"),
              static_cast<int>(f.value_types[n.inputs[0]].dtype)}]
          .push_back(static_cast<int>(i));
    }
    const std::vector<int>* best = nullptr;
    for (const auto& [k, g] : groups)
      if (!best || g.size() > best->size()) best = &g;
    if (!best || best->size() < 2) return false;
    const Node& first = f.nodes[f.producer[vals[(*best)[0]].value]];
    const bool trans_a = product_flag(first, "trans_a"), trans_b = product_flag(first, "trans_b");
    const DType dtype = f.value_types[first.inputs[0]].dtype;

    // cat(a_i) along K (a is (M,K), or (K,M) when transposed), cat(b_i) too.
    std::vector<int> as, bs, rest;
    std::vector<bool> merged(vals.size(), false);
    for (int i : *best) merged[i] = true;
    int64_t ka = 0;
    for (size_t i = 0; i < vals.size(); ++i) {
      if (!merged[i]) {
        rest.push_back(vals[i].value);
        continue;
      }
      Node& p = f.nodes[f.producer[vals[i].value]];
      as.push_back(p.inputs[0]);
      bs.push_back(p.inputs[1]);
      ka += f.value_types[p.inputs[0]].shape[trans_a ? 0 : 1];
      p.dead = true;
    }
    Node& r = f.nodes[root];
    const TensorType out = f.value_types[r.outputs[0]];
    const std::string base = r.name + ".merged";
    Shape sa = f.value_types[as[0]].shape, sb = f.value_types[bs[0]].shape;
    sa[trans_a ? 0 : 1] = ka;
    sb[trans_b ? 1 : 0] = ka;
    std::vector<Node> fresh;
    auto add_node = [&](const std::string& name, const char* op, std::vector<int> in,
                        const TensorType& t, json attrs) {
      Node n;
      n.name = name;
      n.op = op;
      n.attrs = std::move(attrs);
      n.inputs = std::move(in);
      n.source = r.source;
      n.outputs = {add_value(f, name, t)};
      n.declared = {t};
      fresh.push_back(std::move(n));
      return fresh.back().outputs[0];
    };
    const int ca = add_node(base + ".a", kCat, as, {dtype, sa}, {{"dim", trans_a ? 0 : 1}});
    const int cb = add_node(base + ".b", kCat, bs, {dtype, sb}, {{"dim", trans_b ? 1 : 0}});
    const json mm_attrs = {{"trans_a", trans_a}, {"trans_b", trans_b}};
    // The root keeps its output value: it becomes the product, or the last sum.
    for (int s : sums)
      if (s != root) f.nodes[s].dead = true;
    Node& rt = f.nodes[root];
    if (rest.empty()) {
      rt.op = kMatmul;
      rt.inputs = {ca, cb};
      rt.attrs = mm_attrs;
    } else {
      int acc = add_node(base, kMatmul, {ca, cb}, out, mm_attrs);
      for (size_t i = 0; i + 1 < rest.size(); ++i)
        acc = add_node(base + ".sum" + std::to_string(i), kAdd, {acc, rest[i]}, out, {{"alpha", 1}});
      rt.op = kAdd;
      rt.inputs = {acc, rest.back()};
      rt.attrs = {{"alpha", 1}};
    }
    rt.def = nullptr;  // compact() re-resolves it
    f.nodes.insert(f.nodes.begin() + root, std::make_move_iterator(fresh.begin()),
                   std::make_move_iterator(fresh.end()));
    return true;
  }
};

}  // namespace

void merge_summed_products(Function& f) {
  // One tree at a time: a rewrite inserts nodes, so the indices are redone.
  for (bool again = true; again;) {
    again = false;
    Merger m{f};
    for (int i = static_cast<int>(f.nodes.size()) - 1; i >= 0 && !again; --i) {
      const Node& n = f.nodes[i];
      if (!m.is_sum(n)) continue;
      // A root: its value is not summed further by a sum that expands it.
      const int v = n.outputs[0];
      bool inner = false;
      if (!m.outs[v] && m.readers[v].size() == 1 && m.is_sum(f.nodes[m.readers[v][0]])) inner = true;
      if (inner) continue;
      if (m.merge(i)) {
        compact(f);
        again = true;
      }
    }
  }
}

}  // namespace ts

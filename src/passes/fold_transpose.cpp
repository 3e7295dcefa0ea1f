#include "passes/fold_transpose.h"

#include <algorithm>

#include "ir/rewrite.h"
#include "ops/matmul.h"
#include "ops/shape.h"
#include "passes/products.h"

namespace ts {
namespace {

// The ops the folds produce (FuseRole Transpose, MatMulT and AddMmT).
const char* const kT = opname::t;
const char* const kMatmul = "trainstep.matmul";
const char* const kAddmmT = opname::addmm_t;

FuseRole role(const Node& n) { return def_of(n).fuse_role; }

bool is_t(const Node& n) { return role(n) == FuseRole::Transpose; }

// addmm, or trainstep.addmm: mat1 and mat2 are inputs 1 and 2.
bool is_addmm(const Node& n) { return role(n) == FuseRole::AddMm || role(n) == FuseRole::AddMmT; }

// A node that can read an operand transposed in place.
bool reads_transposed(const Node& n) { return is_product(n) || is_addmm(n); }

// The live node producing v if it is a transpose, else -1.
int transpose_producer(const Function& f, int v) {
  if (v < 0) return -1;
  int p = f.producer[v];
  return p >= 0 && !f.nodes[p].dead && is_t(f.nodes[p]) ? p : -1;
}

void set_matmul(Node& n, int a, int b, bool ta, bool tb) {
  n.op = kMatmul;
  n.def = nullptr;  // compact() re-resolves it
  n.inputs = {a, b};
  n.attrs = {{"trans_a", ta}, {"trans_b", tb}};
}

// The live node producing v if it swaps the last two dims of a rank-3
// tensor (aten.transpose.int with dims 1 and 2, or -1 and -2), else -1.
int swap_last_producer(const Function& f, int v) {
  if (v < 0) return -1;
  const int p = f.producer[v];
  if (p < 0 || f.nodes[p].dead || role(f.nodes[p]) != FuseRole::SwapDims) return -1;
  const Node& n = f.nodes[p];
  if (n.inputs.empty() || n.inputs[0] < 0 || f.value_types[n.inputs[0]].shape.size() != 3)
    return -1;
  const json d0 = n.attrs.value("dim0", json()), d1 = n.attrs.value("dim1", json());
  if (!d0.is_number_integer() || !d1.is_number_integer()) return -1;
  const int64_t a = (d0.get<int64_t>() % 3 + 3) % 3, b = (d1.get<int64_t>() % 3 + 3) % 3;
  return std::min(a, b) == 1 && std::max(a, b) == 2 ? p : -1;
}

// A batched product: bmm, or a trainstep.matmul of rank-3 operands.
bool is_batched_product(const Function& f, const Node& n) {
  if (role(n) == FuseRole::BatchMatMul) return true;
  return role(n) == FuseRole::MatMulT && n.inputs.size() == 2 && n.inputs[0] >= 0 &&
         f.value_types[n.inputs[0]].shape.size() == 3;
}

// Does any live node other than `self` read v, or is v a function output?
bool read_elsewhere(const Function& f, int v, size_t self) {
  for (const auto& p : f.outputs)
    if (p.value == v) return true;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    if (i == self || f.nodes[i].dead) continue;
    for (int u : f.nodes[i].inputs)
      if (u == v) return true;
  }
  return false;
}

// torch 2.x's decompositions write t(x) as permute(x, [1, 0]); that form
// becomes aten.t so the folds below see it.
bool canonicalize_permutes(Function& f) {
  bool changed = false;
  for (auto& n : f.nodes) {
    if (n.dead || role(n) != FuseRole::Permute || n.inputs.size() != 1 || n.inputs[0] < 0)
      continue;
    const json dims = n.attrs.value("dims", json());
    if (f.value_types[n.inputs[0]].shape.size() != 2 || dims != json::array({1, 0})) continue;
    n.op = kT;
    n.def = nullptr;  // compact() re-resolves it
    n.attrs = json::object();
    changed = true;
  }
  return changed;
}

bool is_cast(const Node& n) { return def_of(n).algebra.value_cast; }

// The one live node reading v (v not a function output), else -1.
int sole_reader(const Function& f, const std::vector<std::vector<int>>& readers,
                const std::vector<bool>& outs, int v) {
  if (v < 0 || outs[v] || readers[v].size() != 1) return -1;
  return f.nodes[readers[v][0]].dead ? -1 : readers[v][0];
}

// Nodes first (value `mid` between them) and second exchange ops: first
// now does second's op on first's input, second does first's op on mid.
// A cast and a transpose commute, so the result is the same.
void swap_ops(Function& f, Node& first, Node& second) {
  const int mid = first.outputs.at(0);
  const TensorType in = f.value_types[first.inputs.at(0)];
  const TensorType out = f.value_types[second.outputs.at(0)];
  // mid now holds the other op's result: the cast's dtype with the
  // transpose's input shape, or the transposed shape in the input's dtype.
  const TensorType m = is_cast(second) ? TensorType{out.dtype, in.shape}
                                       : TensorType{in.dtype, out.shape};
  std::swap(first.op, second.op);
  std::swap(first.attrs, second.attrs);
  first.def = second.def = nullptr;  // compact() re-resolves them
  f.value_types[mid] = m;
  first.declared.at(0) = m;
}

// Autocast puts a cast between a transpose and its product: the forward
// casts t(weight) to bfloat16, the backward casts the product and then
// transposes it. A transpose moved to the product's side folds into it
// below: cast(t(x)) -> t(cast(x)) when the cast feeds products (addmm
// included) and transposes only, and
// t(cast(p)) -> cast(t(p)) when p is a product's or a transpose's (which
// then cancels).
bool move_transposes_to_products(Function& f) {
  bool changed = false;
  const auto readers = consumers(f);
  const auto outs = output_values(f);
  for (auto& n : f.nodes) {
    if (n.dead || n.outputs.size() != 1) continue;
    const int r = sole_reader(f, readers, outs, n.outputs[0]);
    if (r < 0) continue;
    Node& next = f.nodes[r];
    if (next.outputs.size() != 1 || next.outputs[0] < 0) continue;
    bool swap = false;
    if (is_t(n) && is_cast(next)) {  // cast(t(x)), read by products and transposes
      // Under autocast the backward reuses the forward's bfloat16 weight,
      // t(cast(t(w))): that t cancels once the cast reads w itself.
      const int v = next.outputs[0];
      swap = !outs[v] && !readers[v].empty();
      for (int c : readers[v]) {
        const Node& rn = f.nodes[c];
        swap = swap && !rn.dead && (reads_transposed(rn) || is_t(rn));
      }
    } else if (is_cast(n) && is_t(next) && n.inputs.at(0) >= 0) {  // t(cast(p))
      const int p = f.producer[n.inputs[0]];
      swap = p >= 0 && !f.nodes[p].dead && (is_product(f.nodes[p]) || is_t(f.nodes[p])) &&
             sole_reader(f, readers, outs, n.inputs[0]) == static_cast<int>(&n - f.nodes.data());
    }
    if (swap) {
      swap_ops(f, n, next);
      changed = true;
    }
  }
  return changed;
}

// Operands ia and ia + 1 of n (a product's a, b; addmm's mat1, mat2) with
// the transposes producing them (transposed(v): the producer, or -1) folded
// into n's trans flags. False when neither operand is such a transpose.
template <class Transposed>
bool fold_operands(const Function& f, const Node& n, int ia, Transposed transposed, int& a, int& b,
                   bool& ta, bool& tb) {
  a = n.inputs.at(ia);
  b = n.inputs.at(ia + 1);
  ta = product_flag(n, "trans_a");
  tb = product_flag(n, "trans_b");
  bool fold = false;
  if (int p = transposed(a); p >= 0) {
    a = f.nodes[p].inputs.at(0);
    ta = !ta;
    fold = true;
  }
  if (int p = transposed(b); p >= 0) {
    b = f.nodes[p].inputs.at(0);
    tb = !tb;
    fold = true;
  }
  return fold;
}

// Nodes are in execution order, so a product is rewritten before the t
// that reads it, and a t before the t or product that reads it.
bool fold_once(Function& f, bool batched) {
  bool changed = false;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    Node& n = f.nodes[i];
    if (n.dead) continue;
    if (is_t(n)) {
      int x = n.inputs.at(0);
      if (int p = transpose_producer(f, x); p >= 0) {  // t(t(y)) -> y
        if (n.outputs[0] >= 0) replace_uses(f, n.outputs[0], f.nodes[p].inputs.at(0));
        n.dead = true;
        changed = true;
        continue;
      }
      int p = x >= 0 ? f.producer[x] : -1;
      if (p >= 0 && !f.nodes[p].dead && is_product(f.nodes[p]) && !read_elsewhere(f, x, i)) {
        // (op(a) @ op(b))^T = op(b)^T @ op(a)^T; the t node takes over.
        Node& m = f.nodes[p];
        bool ta = product_flag(m, "trans_a"), tb = product_flag(m, "trans_b");
        set_matmul(n, m.inputs.at(1), m.inputs.at(0), !tb, !ta);
        m.dead = true;
        changed = true;
      }
      continue;
    }
    if (is_addmm(n) && n.inputs.size() == 3) {  // addmm(self, op(a), op(b))
      int a, b;
      bool ta, tb;
      if (fold_operands(f, n, 1, [&](int v) { return transpose_producer(f, v); }, a, b, ta, tb)) {
        n.op = kAddmmT;
        n.def = nullptr;  // compact() re-resolves it
        n.inputs = {n.inputs[0], a, b};
        n.attrs["trans_a"] = ta;
        n.attrs["trans_b"] = tb;
        changed = true;
      }
      continue;
    }
    const bool rank3 = batched && is_batched_product(f, n);
    if (rank3 || is_product(n)) {
      // The operand's transpose: aten.t for rank 2, the last two dims' swap for rank 3.
      auto transposed = [&](int v) {
        return rank3 ? swap_last_producer(f, v) : transpose_producer(f, v);
      };
      int a, b;
      bool ta, tb;
      if (fold_operands(f, n, 0, transposed, a, b, ta, tb)) {
        set_matmul(n, a, b, ta, tb);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

void fold_transpose(Function& f, bool batched) {
  bool changed = canonicalize_permutes(f);
  // A fold can leave a cast between a transpose and a product that a move
  // then clears: a few rounds reach the fixed point (mm, t, cast, t: two).
  for (int round = 0; round < 4; ++round) {
    const bool moved = move_transposes_to_products(f);
    const bool folded = fold_once(f, batched);
    changed = changed || moved || folded;
    if (!moved && !folded) break;
  }
  if (!changed) return;
  // Remove transposes nobody reads (dropping one may free the t it reads).
  for (bool again = true; again;) {
    again = false;
    auto readers = consumers(f);
    auto outs = output_values(f);
    for (auto& n : f.nodes) {
      if (n.dead || !(is_t(n) || role(n) == FuseRole::SwapDims)) continue;
      int v = n.outputs[0];
      if (v < 0 || (readers[v].empty() && !outs[v])) {
        n.dead = true;
        again = true;
      }
    }
  }
  compact(f);
}

}  // namespace ts

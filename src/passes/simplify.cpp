// Algebraic simplification. Every rule replaces a node by a value of exactly
// the same type (dtype, shape and `wrapped`), so promotion and broadcasting
// never change what a consumer sees. Constants are read through their own
// kernel (constant_value), i.e. after their dtype cast.
//
// x + 0 -> x is exact except for x = -0.0 (gives +0.0), which no consumer in
// a training step can tell apart except through division by zero.

#include "passes/cleanup.h"
#include "passes/const_eval.h"

namespace ts {

namespace {

bool is_const(const Function& f, int v, double want) {
  std::optional<double> c = constant_value(f, v);
  return c && *c == want;
}

// A number attribute (`other` of the .Scalar ops) equal to want.
bool attr_is(const Node& n, const char* key, double want) {
  return n.attrs.contains(key) && n.attrs.at(key).is_number() && n.attrs.at(key).get<double>() == want;
}

// The scale (alpha) absent or 1: `self + alpha * other` is plain addition.
bool unit_scale(const Node& n, const char* key) {
  return !n.attrs.contains(key) || n.attrs.at(key).is_null() || attr_is(n, key, 1);
}

// The value n can be replaced by, or -1. The op's Algebra says which rules
// hold for it.
int identity_of(const Function& f, Node& n) {
  const int out = n.outputs[0];
  auto in = [&](size_t k) { return k < n.inputs.size() ? n.inputs[k] : -1; };
  // Only if the result type is exactly x's.
  auto keep = [&](int x) { return x >= 0 && same_type(f.value_types[x], f.value_types[out]) ? x : -1; };
  const int a = in(0), b = in(1);
  if (a < 0) return -1;
  const OpDef& d = def_of(n);
  const Algebra& al = d.algebra;
  if (al.identity && (!al.scale_attr || unit_scale(n, al.scale_attr))) {
    const double e = *al.identity;
    if (al.identity_attr) {
      if (attr_is(n, al.identity_attr, e)) return keep(a);
    } else if (b >= 0) {
      if (is_const(f, b, e) && keep(a) >= 0) return a;
      if (al.commutes && is_const(f, a, e)) return keep(b);
    }
  }
  const Node* p = producer_of(f, a);
  if (al.involution && p && p->op == n.op) return keep(p->inputs[0]);
  if (al.value_cast) return keep(a);
  if (d.alias_input0) {
    // A view of a reshape views the original: all reinterpret one buffer.
    while (al.reshape_like && p && p->def && p->def->alias_input0) {
      n.inputs[0] = p->inputs[0];
      p = producer_of(f, n.inputs[0]);
    }
    return keep(n.inputs[0]);  // a reshape to the same shape
  }
  return -1;
}

}  // namespace

void simplify(Function& f) {
  std::vector<int> repl(f.value_names.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = static_cast<int>(v);
  for (Node& n : f.nodes) {
    if (n.dead) continue;
    for (int& v : n.inputs)
      if (v >= 0) v = repl[v];
    if (n.outputs.size() != 1 || n.outputs[0] < 0) continue;
    const int x = identity_of(f, n);
    if (x < 0) continue;
    repl[n.outputs[0]] = x;
    n.dead = true;
  }
  for (auto& p : f.outputs) p.value = repl[p.value];
}

}  // namespace ts

#include "passes/fuse_relu_backward.h"

#include "ir/rewrite.h"
#include "ops/op.h"

namespace ts {

namespace {

bool zero_number(const json& j) { return j.is_number() && j.get<double>() == 0.0; }

bool is_zero_constant(const Function& f, int v) {
  const int p = f.producer[v];
  if (p < 0 || def_of(f.nodes[p]).constant != ConstRole::Literal || !f.value_types[v].shape.empty())
    return false;
  return zero_number(f.nodes[p].attrs.value("value", json()));
}

struct Rewriter {
  Function& f;
  std::vector<std::vector<int>> readers = consumers(f);
  std::vector<bool> outs = output_values(f);

  // The op's own word on whether this node can take relu's backward.
  bool fusable(const Node& n, const TensorType& x) const {
    const OpDef& d = def_of(n);
    return d.relu_backward_fusable && d.relu_backward_fusable(node_ctx(f, n), x);
  }

  bool only_reader(int v, int node) const {
    return v >= 0 && !outs[v] && readers[v].size() == 1 && readers[v][0] == node;
  }

  // Pooling backward %g (node gi), mask from x; node yi (the where, or the
  // cast ending autocast's detour) becomes the code backward.
  bool pool(int yi, int gi, int x) {
    const Node& pb = f.nodes[gi];
    const int idx = pb.inputs[2];
    if (pb.inputs[1] != x || f.producer[idx] < 0) return false;
    const int fi = f.producer[idx];
    const Node& fwd = f.nodes[fi];
    if (def_of(fwd).fuse_role != FuseRole::MaxPool || fwd.inputs[0] != x ||
        fwd.attrs != pb.attrs || !only_reader(idx, gi))
      return false;
    const TensorType xt = f.value_types[x];  // a copy: add_value below grows value_types
    if (!fusable(fwd, xt)) return false;

    // The forward and the where take their fused forms (max_pool2d_code
    // and its backward).
    const char* code_fwd = def_of(fwd).relu_fused;
    const char* code_bwd = def_of(pb).relu_fused;
    const TensorType ct{DType::U8, f.value_types[idx].shape};
    const int code = add_value(f, fwd.name + ".code", ct);
    Node& fw = f.nodes[fi];
    fw.op = code_fwd;
    fw.def = nullptr;  // compact() re-resolves it
    fw.outputs[1] = code;
    fw.declared[1] = ct;
    Node& y = f.nodes[yi];
    y.op = code_bwd;
    y.def = nullptr;
    y.attrs = fw.attrs;
    y.attrs["input_size"] = {xt.shape[xt.shape.size() - 2], xt.shape[xt.shape.size() - 1]};
    y.inputs = {f.nodes[gi].inputs[0], code};
    f.nodes[gi].dead = true;
    return true;
  }

  // Convolution backward: %g is its grad_input, the convolution read x;
  // the fused node writes y (node yi's output 0).
  bool conv(int yi, int gi, int x, int g) {
    Node& cb = f.nodes[gi];
    if (cb.inputs[1] != x || cb.outputs[0] != g) return false;
    if (!fusable(cb, f.value_types[x])) return false;
    cb.op = def_of(cb).relu_fused;
    cb.def = nullptr;
    cb.outputs[0] = f.nodes[yi].outputs[0];
    cb.declared[0] = f.nodes[yi].declared[0];
    f.nodes[yi].dead = true;
    return true;
  }

  // The input of v's producer if it is a cast from bfloat16 to float32
  // (exact), else -1.
  int widened_from(int v) const {
    const int p = v >= 0 ? f.producer[v] : -1;
    if (p < 0 || !def_of(f.nodes[p]).algebra.value_cast || f.value_types[v].dtype != DType::F32)
      return -1;
    const int src = f.nodes[p].inputs.at(0);
    return src >= 0 && f.value_types[src].dtype == DType::BF16 ? src : -1;
  }

  // The node that casts v, its sole reader, to dtype `to`, or -1.
  int sole_cast_to(int v, DType to) const {
    if (v < 0 || outs[v] || readers[v].size() != 1) return -1;
    const int r = readers[v][0];
    const Node& n = f.nodes[r];
    return def_of(n).algebra.value_cast && n.outputs[0] >= 0 && f.value_types[n.outputs[0]].dtype == to ? r
                                                                                                        : -1;
  }
};

}  // namespace

void fuse_relu_backward(Function& f) {
  Rewriter rw{f};
  bool changed = false;
  for (int wi = 0; wi < static_cast<int>(f.nodes.size()); ++wi) {
    const Node& w = f.nodes[wi];
    if (w.dead || def_of(w).fuse_role != FuseRole::Where || w.inputs.size() != 3 || w.outputs[0] < 0)
      continue;
    const int mask = w.inputs[0], zero = w.inputs[1], g = w.inputs[2];
    if (mask < 0 || zero < 0 || g < 0 || f.producer[mask] < 0 || f.producer[g] < 0) continue;
    const int li = f.producer[mask], gi = f.producer[g];
    const Node& le = f.nodes[li];
    if (def_of(le).fuse_role != FuseRole::LeScalar || !zero_number(le.attrs.value("other", json())) ||
        !is_zero_constant(f, zero) || !rw.only_reader(g, wi))
      continue;
    int x = le.inputs[0];
    // Autocast's form runs relu's backward in float32 between casts:
    //   y = bf16(where(le(f32(x), 0), 0, f32(g)))
    // which is where(x <= 0, 0, g) exactly: the casts go with the where.
    int yi = wi, gv = g, gi_at = gi, x_cast = -1, g_cast = -1;
    const int xb = rw.widened_from(x), gb = rw.widened_from(g);
    if (xb >= 0 && gb >= 0) {
      yi = rw.sole_cast_to(w.outputs[0], DType::BF16);
      if (yi < 0 || !rw.only_reader(g, wi) || f.producer[gb] < 0) continue;
      x_cast = f.producer[x];
      g_cast = f.producer[g];
      x = xb, gv = gb, gi_at = f.producer[gb];
      if (!rw.only_reader(gv, g_cast)) continue;
    }
    if (f.value_types[f.nodes[yi].outputs[0]] != f.value_types[x]) continue;
    const FuseRole role = def_of(f.nodes[gi_at]).fuse_role;
    bool done = false;
    if (role == FuseRole::MaxPoolBackward) done = rw.pool(yi, gi_at, x);
    if (role == FuseRole::ConvBackward) done = rw.conv(yi, gi_at, x, gv);
    if (!done) continue;
    const bool le_dies = rw.only_reader(mask, wi);
    if (yi != wi) {  // the detour's where and casts go too
      f.nodes[wi].dead = true;
      f.nodes[g_cast].dead = true;
      if (le_dies && rw.only_reader(le.inputs[0], li)) f.nodes[x_cast].dead = true;
    }
    if (le_dies) f.nodes[li].dead = true;
    if (rw.only_reader(zero, wi)) f.nodes[f.producer[zero]].dead = true;
    changed = true;
  }
  if (changed) compact(f);
}

}  // namespace ts

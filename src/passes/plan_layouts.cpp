#include "passes/plan_layouts.h"

#include <numeric>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "ops/conv_transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

namespace ts {

namespace {

// A convolution node whose kernel takes blocked activations: not a
// transposed one (ops/conv_transpose.h), which takes plain layouts only.
bool is_conv_fwd(const Node& n) {
  return (n.op == "aten.convolution.default" || n.op == "trainstep.conv2d_relu") &&
         conv_takes_blocked_relu(n.attrs);
}
bool is_conv_bwd(const Node& n) {
  return (n.op == "aten.convolution_backward.default" || n.op == "trainstep.conv_backward_relu") &&
         conv_takes_blocked_relu(n.attrs);
}

// Ports whose kernels read or write a blocked activation themselves:
// convolution forward input 0 (src) and output 0 (dst); its backward
// inputs 0 (grad_output) and 1 (src) and output 0 (grad_input); the code
// max-pool's input and its backward's grad_input; batch norm's input and
// output, and its backward's grad_output, input and grad_input.
bool blocks_input(const Node& n, int i) {
  const std::string& op = n.op;
  return (is_conv_fwd(n) && i == 0) || (is_conv_bwd(n) && (i == 0 || i == 1)) ||
         (op == "trainstep.max_pool2d_code" && i == 0) ||
         (op == "aten.native_batch_norm.default" && i == 0) ||
         (op == "aten.native_batch_norm_backward.default" && (i == 0 || i == 1));
}
bool blocks_output(const Node& n, int j) {
  const std::string& op = n.op;
  return j == 0 && (is_conv_fwd(n) || is_conv_bwd(n) || op == "trainstep.max_pool2d_code_backward" ||
                    op == "aten.native_batch_norm.default" ||
                    op == "aten.native_batch_norm_backward.default");
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

void plan_layouts(Function& f, int64_t block) {
  const Layout want = layout_from_block(block);
  if (want == Layout::Plain) return;
  const int nv = static_cast<int>(f.value_types.size());
  auto is_big = [&](int v) { return shape_numel(f.value_types[v].shape) != 1; };

  // Values that must share a layout: the tensors of a layout-agnostic node,
  // a relu-masked convolution backward's x and grad_input (the mask is
  // applied element by element), and batch norm's activations (its kernels
  // take one layout for all of them).
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
    auto join = [&](int a, int b) {
      if (a >= 0 && b >= 0) sets.join(a, b);
    };
    if (n.op == "trainstep.conv_backward_relu") join(n.inputs[1], n.outputs[0]);
    if (n.op == "aten.native_batch_norm.default") join(n.inputs[0], n.outputs[0]);
    if (n.op == "aten.native_batch_norm_backward.default") {
      join(n.inputs[0], n.inputs[1]);
      join(n.inputs[1], n.outputs[0]);
    }
  }

  // A set is blocked when each of its values can be (rank 4, channels a
  // multiple of the block, made inside the function and not returned) and
  // each port touching it is a blocking kernel's or a layout-agnostic
  // node's; and some kernel gains from it (a set of pointwise nodes alone
  // would only move the reorders).
  std::vector<char> ok(nv, 1), gains(nv, 0);
  auto outs = output_values(f);
  for (int v = 0; v < nv; ++v) {
    const TensorType& t = f.value_types[v];
    if (outs[v] || f.producer[v] < 0 || t.shape.size() != 4 || t.shape[1] % block != 0)
      ok[sets.find(v)] = 0;
  }
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    const Node& n = f.nodes[k];
    if (n.dead) continue;
    // A port of this node holds value v; `blocking`: its kernel reads or
    // writes it blocked.
    auto touch = [&](int v, bool blocking) {
      if (v < 0 || (agnostic[k] && !is_big(v))) return;
      if (blocking && f.value_types[v].dtype == DType::F32)
        gains[sets.find(v)] = 1;
      else if (!agnostic[k])
        ok[sets.find(v)] = 0;
    };
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) touch(n.inputs[i], blocks_input(n, i));
    for (int j = 0; j < static_cast<int>(n.outputs.size()); ++j) touch(n.outputs[j], blocks_output(n, j));
  }
  std::vector<bool> blocked(nv, false);
  bool any = false;
  for (int v = 0; v < nv; ++v) {
    const int s = sets.find(v);
    blocked[v] = ok[s] && gains[s];
    any = any || blocked[v];
  }
  if (!any) return;
  // Pointwise nodes get no attribute: they work in any layout.
  for (size_t k = 0; k < f.nodes.size(); ++k) {
    Node& n = f.nodes[k];
    if (n.dead || agnostic[k]) continue;
    const int ni = static_cast<int>(n.inputs.size()), no = static_cast<int>(n.outputs.size());
    for (int i = 0; i < ni; ++i)
      if (n.inputs[i] >= 0 && blocked[n.inputs[i]]) set_layout(n, "in_layouts", i, ni, layout_name(want));
    for (int j = 0; j < no; ++j)
      if (n.outputs[j] >= 0 && blocked[n.outputs[j]]) set_layout(n, "out_layouts", j, no, layout_name(want));
  }
  compact(f);  // re-verifies: each node checks its layouts against its types
}

}  // namespace ts

#include "passes/plan_layouts.h"

#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "ops/layout.h"

namespace ts {

namespace {

bool is_conv_fwd(const std::string& op) {
  return op == "aten.convolution.default" || op == "trainstep.conv2d_relu";
}
bool is_conv_bwd(const std::string& op) {
  return op == "aten.convolution_backward.default" || op == "trainstep.conv_backward_relu";
}

// Ports of a node that may hold a blocked activation: convolution forward
// input 0 (src) and output 0 (dst); backward inputs 0 (grad_output) and 1
// (src) and output 0 (grad_input).
// Also the input of the code max-pool after a conv+relu, and the
// gradient its backward hands to the conv's backward.
bool may_block_input(const Node& n, int i) {
  return (is_conv_fwd(n.op) && i == 0) || (is_conv_bwd(n.op) && (i == 0 || i == 1)) ||
         (n.op == "trainstep.max_pool2d_code" && i == 0);
}
bool may_block_output(const Node& n, int j) {
  return (is_conv_fwd(n.op) || is_conv_bwd(n.op) ||
          n.op == "trainstep.max_pool2d_code_backward") && j == 0;
}

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
  std::vector<bool> blocked(nv, false);
  auto outs = output_values(f);
  auto readers = consumers(f);
  for (int v = 0; v < nv; ++v) {
    const TensorType& t = f.value_types[v];
    const int p = f.producer[v];
    if (outs[v] || p < 0 || readers[v].empty()) continue;
    if (t.dtype != DType::F32 || t.shape.size() != 4 || t.shape[1] % block != 0) continue;
    const Node& prod = f.nodes[p];
    if (prod.dead || !may_block_output(prod, 0) || prod.outputs[0] != v) continue;
    bool ok = true;
    for (int r : readers[v]) {
      const Node& n = f.nodes[r];
      for (int i = 0; i < static_cast<int>(n.inputs.size()) && ok; ++i)
        if (n.inputs[i] == v && !may_block_input(n, i)) ok = false;
    }
    blocked[v] = ok;
  }
  // conv_backward_relu masks grad_input by its x element by element, so
  // both take one layout: drop both to plain where they differ, until stable.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Node& n : f.nodes) {
      if (n.dead || n.op != "trainstep.conv_backward_relu") continue;
      int x = n.inputs[1], gx = n.outputs[0];
      bool bx = x >= 0 && blocked[x], bg = gx >= 0 && blocked[gx];
      if (bx == bg) continue;
      if (x >= 0) blocked[x] = false;
      if (gx >= 0) blocked[gx] = false;
      changed = true;
    }
  }
  bool any = false;
  for (bool b : blocked) any = any || b;
  if (!any) return;
  for (Node& n : f.nodes) {
    if (n.dead) continue;
    const int ni = static_cast<int>(n.inputs.size()), no = static_cast<int>(n.outputs.size());
    for (int i = 0; i < ni; ++i)
      if (n.inputs[i] >= 0 && blocked[n.inputs[i]]) set_layout(n, "in_layouts", i, ni, layout_name(want));
    for (int j = 0; j < no; ++j)
      if (n.outputs[j] >= 0 && blocked[n.outputs[j]]) set_layout(n, "out_layouts", j, no, layout_name(want));
  }
  compact(f);  // re-verifies: each node checks its layouts against its types
}

}  // namespace ts

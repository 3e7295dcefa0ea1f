#include "runtime/node_io.h"

namespace ts {

NodeIO node_io(const Function& f, const Node& n, const MemoryPlan& plan) {
  NodeIO io;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    io.out_types.push_back(n.outputs[k] >= 0 ? f.value_types[n.outputs[k]] : n.declared[k]);
  io.in.resize(n.inputs.size());
  io.out.resize(n.outputs.size());
  io.out_live.resize(n.outputs.size());
  for (size_t k = 0; k < n.inputs.size(); ++k)
    if (n.inputs[k] >= 0) {
      io.in[k].dtype = f.value_types[n.inputs[k]].dtype;
      io.in[k].shape = f.value_types[n.inputs[k]].shape;
    }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    io.out[k].dtype = io.out_types[k].dtype;
    io.out[k].shape = io.out_types[k].shape;
    io.out_live[k] = n.outputs[k] >= 0 && plan.live[n.outputs[k]];
    io.any_live = io.any_live || io.out_live[k];
  }
  return io;
}

void NodeIO::point(const Node& n, const std::vector<Tensor>& values) {
  for (size_t k = 0; k < in.size(); ++k)
    in[k].data = n.inputs[k] >= 0 ? values[n.inputs[k]].data : nullptr;
  for (size_t k = 0; k < out.size(); ++k)
    out[k].data = out_live[k] ? values[n.outputs[k]].data : nullptr;
}

}  // namespace ts

// A node's tensors as its kernel sees them, shared by the executors (CPU,
// and each device's): inputs and outputs with their types, and which
// outputs someone reads. Data pointers are set by point() once the values
// have memory (an arena slot, a bound input, a donated buffer).
#pragma once
#include <vector>

#include "ir/program.h"
#include "runtime/memory_plan.h"

namespace ts {

struct NodeIO {
  std::vector<TensorType> out_types;  // inferred, or as declared for an unused output
  std::vector<Tensor> in, out;
  std::vector<bool> out_live;  // false: nobody reads it, the kernel gets nullptr
  bool any_live = false;       // a node none of whose outputs is read is not run

  // Data pointers from `values` (by value id): an absent input and an
  // unread output get nullptr.
  void point(const Node& n, const std::vector<Tensor>& values);
};

NodeIO node_io(const Function& f, const Node& n, const MemoryPlan& plan);

// A node's accumulated run time in a profile (`bench --profile`).
struct NodeTime {
  const Node* node;
  double seconds = 0;
  double layout_seconds = 0;  // of which layout reorders inside the kernel (CPU)
};

}  // namespace ts

// Entry point for the elementwise ops; the kernels live in
// elementwise_binary.cpp and elementwise_unary.cpp (shared helpers in
// broadcast.h).
#include "ops/op.h"

namespace ts {

void register_elementwise_binary_ops(OpRegistry&);
void register_elementwise_unary_ops(OpRegistry&);

void register_elementwise_ops(OpRegistry& r) {
  register_elementwise_binary_ops(r);
  register_elementwise_unary_ops(r);
}

}  // namespace ts

// Replaces relu -> max_pool2d and its backward, as the trace records them:
//   %p.0, %p.1 = aten.max_pool2d_with_indices(%x)
//   %pb = aten.max_pool2d_with_indices_backward(%g, %x, %p.1)
//   %m  = aten.le.Scalar(%x) {other: 0}
//   %y  = aten.where.self(%m, <constant 0>, %pb)
// by
//   %p.0, %code = trainstep.max_pool2d_code(%x)
//   %y = trainstep.max_pool2d_code_backward(%g, %code) {input_size}
// when the windows tile %x and the indices and %pb have no other readers.
// The forward keeps one byte per window, so neither the int64 indices nor
// %x (usually the largest activation) stay live through the backward.
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_pool_relu_backward(Function& f);

}  // namespace ts

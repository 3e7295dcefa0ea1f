// Fuses the backward of relu -> max_pool2d, as the trace records it:
//   %p = aten.max_pool2d_with_indices_backward(%g, %x, %idx)
//   %m = aten.le.Scalar(%x) {other: 0}
//   %y = aten.where.self(%m, <constant 0>, %p)
// into %y = trainstep.max_pool2d_relu_backward(%g, %x), when the pooling
// windows tile %x and %p has no other reader. The fused op finds the argmax
// again, so the forward's int64 indices become dead, and it may write %y over
// %x (which usually dies there): two activation-sized buffers fewer at the
// peak of the step.
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_pool_relu_backward(Function& f);

}  // namespace ts

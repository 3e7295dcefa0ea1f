// Folds relu's backward into the backward op that made its gradient. The
// trace writes relu's backward as
//   %m = aten.le.Scalar(%x) {other: 0}
//   %y = aten.where.self(%m, <constant 0>, %g)
// where %x is the relu's output. Two producers of %g are folded:
//
// 1. max-pool over the relu (windows that tile %x; indices and %g read only
//    here):
//      %p.0, %p.1 = aten.max_pool2d_with_indices(%x)
//      %g = aten.max_pool2d_with_indices_backward(%dy, %x, %p.1)
//    becomes
//      %p.0, %code = trainstep.max_pool2d_code(%x)
//      %y = trainstep.max_pool2d_code_backward(%dy, %code) {input_size}
//    The forward keeps one byte per window, so neither the int64 indices nor
//    %x (often the largest activation) stay live through the backward.
//
// 2. a convolution over the relu (%g = grad_input, read only here):
//      %g, %gw, %gb = aten.convolution_backward(%dy, %x, %w)
//    becomes
//      %y, %gw, %gb = trainstep.conv_backward_relu(%dy, %x, %w)
//    which may write %y over %x: one activation-sized buffer fewer.
//
// Under bfloat16 autocast the trace runs relu's backward in float32:
//   %y = to_bf16(where(le(to_f32(%x), 0), 0, to_f32(%g)))
// which equals where(%x <= 0, 0, %g) exactly (both casts from bfloat16 are
// exact, and 0 or a bfloat16 value rounds to itself), so both cases fold it
// too, casts and all (bfloat16 max-pool windows must not overlap).
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_relu_backward(Function& f);

}  // namespace ts

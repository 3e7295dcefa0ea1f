// Layout planning: a 4-D activation that only blocking kernels (convolution
// and its backward, the code max-pool pair, batch norm and its backward)
// and pointwise nodes produce and read is stored in oneDNN's channel-
// blocked layout, so no kernel reorders it (e.g. conv -> batch norm -> relu
// -> conv). The tensors of a pointwise node take one layout together, as
// do a relu-masked convolution backward's x and grad_input. Every other
// value, and every function input or output, stays plain. The choice is
// written into the blocking nodes' "in_layouts" / "out_layouts" attributes
// (ops/layout.h); pointwise nodes carry none, as they work in any layout.
// A set of float32 values takes the channel-blocked layout of `block`
// channels (8 or 16; a value whose channel count is not a multiple of it
// stays plain). A set of bfloat16 values takes channels-last (nhwc) when
// `channels_last` (this CPU runs oneDNN's bf16 convolutions) and every
// blocking kernel touching it takes that (LayoutCaps::channels_last). A
// set mixing the two dtypes stays plain.
#pragma once
#include <cstdint>

#include "ir/program.h"

namespace ts {

void plan_layouts(Function& f, int64_t block, bool channels_last = false);

}  // namespace ts

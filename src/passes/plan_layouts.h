// Layout planning: a 4-D float32 activation that convolutions alone produce
// and read (e.g. conv1's relu output, read by conv2's forward and backward)
// is stored in oneDNN's channel-blocked layout, so neither end reorders it.
// Every other value, and every function input or output, stays plain. The
// choice is written into the nodes' "in_layouts" / "out_layouts" attributes
// (ops/layout.h); `block` is the channel block (8 or 16), and a value whose
// channel count is not a multiple of it stays plain.
#pragma once
#include <cstdint>

#include "ir/program.h"

namespace ts {

void plan_layouts(Function& f, int64_t block);

}  // namespace ts

// Elementwise fusion: connected float32/bool pointwise nodes of one shape
// (ops with a tile form; every tensor operand of that shape or one element)
// become one trainstep.fused_elementwise node, which runs the group over
// cache-sized tiles. 0-d trainstep.constant / aten.scalar_tensor producers
// feeding a group are folded into its program as immediate constants.
//
// A group runs at the position of its last member, so a node joins a group
// only if no node outside the group reads a group value before that
// position (this also rules out cycles through non-fused nodes). Groups of
// one node stay as they are.
#pragma once
#include "ir/program.h"

namespace ts {

void fuse_elementwise(Function& f);

}  // namespace ts

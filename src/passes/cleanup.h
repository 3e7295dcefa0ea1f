// Cleanup passes: each rewrites f in place, marking removed nodes dead
// (Node::dead) and keeping producers current, so they can run back to back;
// compact() then drops the dead nodes and re-verifies. optimize() runs them
// to a fixed point.
#pragma once
#include "ir/program.h"

namespace ts {

// Removes nodes none of whose outputs are read; unread outputs of kept
// nodes become -1. Function inputs stay (they are the signature).
void dce(Function& f);
// Merges nodes with the same op, inputs and attrs into the first one.
// Random ops (OpDef::random: trainstep.philox_*) are never merged.
void cse(Function& f);
// Replaces 0-d nodes computable at compile time (all inputs 0-d constants,
// or no data inputs at all) by trainstep.constant, using the op's kernel.
void fold_constants(Function& f);
// Algebraic identities (x*1, x+0, t(t(x)), view chains, ...) that keep
// types, including the `wrapped` flag, identical.
void simplify(Function& f);

}  // namespace ts

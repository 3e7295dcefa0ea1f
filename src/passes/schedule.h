// Scheduling: reorders nodes (never changes what they compute) so that the
// memory plan needs less arena.
#pragma once
#include "ir/program.h"

namespace ts {

// Runs each optimizer update as soon as it can run. The trace puts every
// update after the whole backward pass, so every gradient stays live until
// then; run right after its gradient is made, an update frees it at once
// (what PyTorch's optimizer-in-backward hooks do by hand).
//
// "Eager" nodes are the sinks (results only the caller reads: new state, the
// loss) and the small nodes (outputs of at most 4 KiB, e.g. the step counter
// and Adam's bias corrections) whose readers are all eager. A list scheduler
// keeps every other node in its order and places each eager node as soon as
// its operands exist. A sink that makes the new value of a state tensor
// also waits for every other reader of the old value, so the memory plan can
// still write the new value over the old one (donation).
//
// Communication (OpDef::comm): a start node is eager, so it runs right after
// the last gradient it reads; its wait node is not, so it keeps its place
// before the first update that reads it.
//
// Pays off only with in-place state update: without donation the new state
// needs arena slots, which would then live longer.
void schedule_updates_early(Function& f);

}  // namespace ts

// Makes a chain of copies that only move elements (transpose, permute,
// expand, as_strided, clone, with the aliasing reshapes between them) one
// aten.as_strided of the chain's first input. Each copy reads a whole
// tensor and writes it again; one strided gather does all of it. A
// transformer's head split (as_strided -> view -> transpose -> expand ->
// clone) is three copies before, one after. The ops say how they view
// their input (OpDef::strided_view); copies that other nodes still read
// stay, and those nobody reads any more are removed.
#pragma once
#include "ir/program.h"

namespace ts {

void compose_views(Function& f);

}  // namespace ts

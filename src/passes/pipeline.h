// The compiler pipeline: IR-to-IR passes run between verify and the
// executor's compile. Each pass is a function `void pass_name(Function&)`
// in its own file under src/passes/, testable as IR text in -> IR text out.
#pragma once
#include "ir/program.h"

namespace ts {

struct CompileOptions {
  bool cleanup = true;  // DCE, CSE, constant folding, algebraic simplification
  bool fusion = true;   // fused elementwise groups, oneDNN post-ops, blocked layouts
  bool inplace = true;  // new state written into the old state's buffers
};

// Runs the enabled passes on f (a copy of the artifact's function).
void optimize(Function& f, const CompileOptions& o);

}  // namespace ts

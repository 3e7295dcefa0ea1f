// The compiler pipeline: IR-to-IR passes run between verify and the
// executor's compile. Each pass is a function `void pass_name(Function&)`
// in its own file under src/passes/, testable as IR text in -> IR text out.
#pragma once
#include "ir/program.h"
#include "passes/target.h"
#include "trainstep/options.h"

namespace ts {

// Runs the enabled passes on f (a copy of the artifact's function), in the
// forms target t's kernels take (its fields choose the passes).
void optimize(Function& f, const CompileOptions& o, const Target& t);
void optimize(Function& f, const CompileOptions& o, Device d = Device::Cpu);

}  // namespace ts

// The compiler pipeline: IR-to-IR passes run between verify and the
// executor's compile. Each pass is a function `void pass_name(Function&)`
// in its own file under src/passes/, testable as IR text in -> IR text out.
#pragma once
#include "ir/program.h"
#include "trainstep/options.h"

namespace ts {

// Runs the enabled passes on f (a copy of the artifact's function), in the
// forms device d's kernels take.
void optimize(Function& f, const CompileOptions& o, Device d = Device::Cpu);

}  // namespace ts

// verify's trace: golden step 0 through train_step as exported (no passes,
// so every node keeps its name), each node's outputs compared with the
// eager values the exporter recorded, "trace/train_step/<value>"
// (`export --trace-values`).
#pragma once
#include <functional>

#include "runtime/artifact.h"
#include "trainstep/verify.h"

namespace ts {

// Calls on_mismatch for each differing value as the nodes run. Throws
// ts::Error when the artifact has no recorded trace.
TraceReport trace_step0(const Artifact& a, double tol, int threads,
                        const std::function<void(const TraceMismatch&)>& on_mismatch);

}  // namespace ts

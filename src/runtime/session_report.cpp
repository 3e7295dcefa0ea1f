// Session calls that read what the session was opened from (kept apart
// from session.cpp, which builds and runs the steps).
#include "runtime/artifact.h"
#include "trainstep/session.h"

namespace ts {

const std::string& Session::model_name() const { return program().name; }

bool Session::artifact_checksummed() const { return artifact().tensors.checksummed; }

}  // namespace ts

// The `format` metadata values that tell trainstep's two file kinds apart
// (docs/format.md), and the checkpoint version this build reads and writes.
#pragma once

namespace ts {

constexpr const char* kArtifactFormat = "trainstep";
constexpr const char* kCheckpointFormat = "trainstep-checkpoint";
constexpr const char* kCheckpointVersion = "1";

}  // namespace ts

// ts::check_file (trainstep/check.h): the file's container and checksums are
// checked as it is read, then its program (an artifact) or metadata (a
// checkpoint), the way loading it for a run would.
#include "trainstep/check.h"

#include "io/checksum.h"
#include "io/safetensors.h"
#include "runtime/artifact.h"
#include "runtime/formats.h"
#include "runtime/memory_plan.h"
#include "trainstep/error.h"
#include "trainstep/session.h"
#include "trainstep/train.h"

namespace ts {

namespace {

std::string meta_of(const SafeTensors& st, const char* key) {
  auto it = st.metadata.find(key);
  return it == st.metadata.end() ? std::string() : it->second;
}

std::string integrity(const SafeTensors& st) {
  return st.checksummed ? std::string("checksums OK (") + kChecksumAlgorithm + ")"
                        : std::string("no checksums");
}

}  // namespace

CheckReport check_file(const std::string& path, const std::string& artifact) {
  SafeTensors st = read_safetensors(path);
  const std::string format = meta_of(st, "format");
  CheckReport r;
  r.checksummed = st.checksummed;
  if (r.checksummed) r.checksum_algorithm = kChecksumAlgorithm;
  r.tensors = st.tensors.size();
  for (const auto& [name, t] : st.tensors) r.tensor_bytes += t.view.nbytes();
  if (format == kArtifactFormat) {
    r.kind = FileKind::Artifact;
    const Artifact a = load_artifact(path, std::move(st));
    r.model = a.program.name;
    r.functions = a.program.functions.size();
  } else if (format == kCheckpointFormat) {
    r.kind = FileKind::Checkpoint;
    const CheckpointMeta m = parse_checkpoint_metadata(st.metadata, path);
    r.model = m.model;
    r.step = m.step;
    // Its position is checked even when no artifact is given.
    if (m.run) r.epoch = resume_position(m, path).epoch;
    if (!artifact.empty()) {
      auto s = Session::open(artifact);
      s->load_checkpoint(path, std::move(st));  // the file is read once
    }
  } else {
    fail(path + ": not a trainstep artifact or checkpoint (its format is '" + format + "'; " +
         integrity(st) + ")");
  }
  return r;
}

}  // namespace ts

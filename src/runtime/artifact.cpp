#include "runtime/artifact.h"

#include "runtime/formats.h"

namespace ts {

const HostTensor& Artifact::tensor(const std::string& name) const {
  const HostTensor* t = tensors.find(name);
  if (!t) fail(path + ": missing tensor '" + name + "'");
  return *t;
}

Artifact::Batch Artifact::golden_batch(int64_t k) const {
  const Function& f = program.function("train_step");
  const std::string prefix = "golden/step" + std::to_string(k) + "/";
  Batch b;
  for (int slot : f.inputs_of(Role::Input))
    b.inputs.push_back(tensor(prefix + "input" + std::to_string(f.inputs[slot].index)).view);
  for (int slot : f.inputs_of(Role::Target)) {
    const int i = f.inputs[slot].index;
    b.targets.push_back(tensor(prefix + "target" + (i ? std::to_string(i) : "")).view);
  }
  return b;
}

Artifact load_artifact(const std::string& path) { return load_artifact(path, read_safetensors(path)); }

Artifact load_artifact(const std::string& path, SafeTensors tensors) {
  Artifact a;
  a.path = path;
  a.tensors = std::move(tensors);
  auto meta = [&](const char* k) -> std::string {
    auto it = a.tensors.metadata.find(k);
    return it == a.tensors.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != kArtifactFormat)
    fail(path + ": not a trainstep artifact (no 'format: trainstep' in its header)");
  if (meta("format_version") != std::to_string(kFormatVersion))
    fail(path + ": unsupported format version '" + meta("format_version") +
         "' (this build reads version " + std::to_string(kFormatVersion) + ")");
  json j;
  try {
    j = json::parse(meta("program"));
  } catch (const json::exception& e) {
    fail(path + ": the program JSON is corrupt: " + e.what());
  }
  a.program = parse_program(j, path);
  for (const auto& s : a.program.state) {
    const HostTensor& t = a.tensor("state/" + s.name);
    if (t.view.type() != s.type)
      fail(path + ": initial state '" + s.name + "' is " + t.view.type().str() +
           " but the program says " + s.type.str());
  }
  return a;
}

}  // namespace ts

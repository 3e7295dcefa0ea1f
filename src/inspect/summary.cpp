// Inspector: the artifact summary `trainstep inspect` prints.
#include <algorithm>

#include "ir/role.h"
#include "runtime/artifact.h"
#include "trainstep/inspect.h"

namespace ts {

namespace {

// The param groups when the optimizer is in the exporter's shape; a
// structured = false summary otherwise.
OptimizerSummary optimizer_summary(const json& opt) {
  OptimizerSummary s;
  s.json = opt.dump();
  try {
    if (!opt.contains("groups")) return s;
    s.type = opt.at("type").get<std::string>();
    s.lr = opt.at("lr").dump();
    for (const auto& g : opt.at("groups")) {
      json o = g.at("options");
      o.erase("lr");
      s.groups.push_back({g.at("params").size(), g.at("updated").size(), g.at("lr_scale").dump(),
                          o.dump()});
    }
    s.structured = true;
  } catch (const json::exception&) {
    s.type.clear();
    s.lr.clear();
    s.groups.clear();
  }
  return s;
}

FunctionSummary function_summary(const std::string& name, const Function& f) {
  FunctionSummary s;
  s.name = name;
  s.inputs = f.inputs.size();
  s.outputs = f.outputs.size();
  s.nodes = f.nodes.size();
  for (const auto& in : f.inputs) s.input_roles[role_name(in.role)]++;
  for (const auto& o : f.outputs) s.output_roles[role_name(o.role)]++;
  for (const auto& in : f.inputs) {
    if (in.role == Role::Input) s.data_inputs.push_back({in.name, in.type.str(), in.batch_dim});
    if (in.role == Role::Target) s.data_targets.push_back({in.name, in.type.str(), in.batch_dim});
  }
  std::map<std::string, int> hist;
  for (const auto& n : f.nodes) hist[n.op]++;
  for (const auto& [op, k] : hist) s.ops.push_back({op, k});
  // Most used first; ties by name.
  std::stable_sort(s.ops.begin(), s.ops.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace

Inspector::Inspector(const std::string& artifact_path)
    : artifact_(std::make_shared<const Artifact>(load_artifact(artifact_path))) {}

Inspector::~Inspector() = default;

bool Inspector::checksummed() const { return artifact_->tensors.checksummed; }

ArtifactSummary Inspector::summary() const {
  const Program& p = artifact_->program;
  ArtifactSummary s;
  s.model = p.name;
  s.format_version = p.version;
  s.batch_size = p.batch_size;
  s.torch_version = p.torch_version;
  s.python_version = p.python_version;
  s.checksummed = checksummed();
  s.optimizer = optimizer_summary(p.optimizer);
  for (const auto& [alias, target] : p.aliases) s.tied.push_back({alias, target});
  s.state_tensors = p.state.size();
  for (const auto& st : p.state) {
    s.state_numel[st.kind] += st.type.numel();
    s.state_bytes[st.kind] += st.type.nbytes();
  }
  for (const auto& [name, f] : p.functions) s.functions.push_back(function_summary(name, f));
  return s;
}

}  // namespace ts

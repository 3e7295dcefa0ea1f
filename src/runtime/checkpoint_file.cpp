#include "runtime/checkpoint_file.h"

namespace ts {

void write_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const Program& p, const std::map<std::string, const Tensor*>& state) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& s : p.state) tensors.emplace_back(s.name, state.at(s.name));
  for (const auto& [alias, target] : p.aliases) tensors.emplace_back(alias, state.at(target));
  write_safetensors(path, metadata, tensors);
}

void check_checkpoint_fits(const SafeTensors& ck, const CheckpointMeta& m, const Program& p,
                           const std::string& path) {
  const std::string other = path + ": checkpoint is for a different model: ";
  for (const auto& s : p.state) {
    const HostTensor* t = ck.find(s.name);
    if (!t)
      fail(other + "it has no tensor '" + s.name + "' (model '" + m.model + "', this artifact is '" +
           p.name + "')");
    if (t->view.type() != s.type)
      fail(other + "'" + s.name + "' is " + t->view.type().str() + ", this artifact needs " +
           s.type.str());
  }
  for (const auto& [n, t] : ck.tensors) {
    if (p.find_state(n)) continue;
    auto al = p.aliases.find(n);  // a tied weight's second name: same tensor, ignored
    if (al == p.aliases.end()) fail(other + "unexpected tensor '" + n + "'");
    const TensorType want = p.find_state(al->second)->type;
    if (t.view.type() != want)
      fail(other + "'" + n + "' (tied to '" + al->second + "') is " + t.view.type().str() +
           ", this artifact needs " + want.str());
  }
}

}  // namespace ts

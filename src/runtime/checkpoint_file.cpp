#include "runtime/checkpoint_file.h"

namespace ts {

void write_checkpoint(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const Program& p, const std::vector<std::string>& names,
                      const std::map<std::string, HostTensor>& state) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& n : names) tensors.emplace_back(n, &state.at(n).view);
  for (const auto& [alias, target] : p.aliases) tensors.emplace_back(alias, &state.at(target).view);
  write_safetensors(path, metadata, tensors);
}

void check_checkpoint_fits(const SafeTensors& ck, const CheckpointMeta& m, const Program& p,
                           const std::map<std::string, HostTensor>& state,
                           const std::string& path) {
  const std::string other = path + ": checkpoint is for a different model: ";
  for (const auto& s : p.state) {
    const HostTensor* t = ck.find(s.name);
    if (!t)
      fail(other + "it has no tensor '" + s.name + "' (model '" + m.model + "', this artifact is '" +
           p.name + "')");
    const Tensor& want = state.at(s.name).view;
    if (t->view.type() != want.type())
      fail(other + "'" + s.name + "' is " + t->view.type().str() + ", this artifact needs " +
           want.type().str());
  }
  for (const auto& [n, t] : ck.tensors) {
    if (state.count(n)) continue;
    auto al = p.aliases.find(n);  // a tied weight's second name: same tensor, ignored
    if (al == p.aliases.end()) fail(other + "unexpected tensor '" + n + "'");
    const Tensor& want = state.at(al->second).view;
    if (t.view.type() != want.type())
      fail(other + "'" + n + "' (tied to '" + al->second + "') is " + t.view.type().str() +
           ", this artifact needs " + want.type().str());
  }
}

}  // namespace ts

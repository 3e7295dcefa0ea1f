#include "runtime/state_store.h"

#include <cstring>

namespace ts {

StateStore::StateStore(const Program& p, ComputeDevice& device, bool host_memory,
                       const std::function<bool(const std::string&)>& holds)
    : device_(device), host_memory_(host_memory) {
  size_t device_bytes = 0;
  std::vector<size_t> offsets;
  std::vector<const StateSpec*> kept;
  for (const auto& s : p.state) {
    if (holds && !holds(s.name)) continue;
    kept.push_back(&s);
    names_.push_back(s.name);
    host_.emplace(s.name, HostTensor(s.type.dtype, s.type.shape));
    bytes_ += s.type.nbytes();
    offsets.push_back(device_bytes);
    device_bytes += (s.type.nbytes() + 255) / 256 * 256;
  }
  if (!host_memory_) device_buf_ = device_.alloc(device_bytes);
  for (size_t i = 0; i < kept.size(); ++i) {
    const std::string& n = kept[i]->name;
    device_ptr_[n] = host_memory_ ? host_.at(n).view.data
                                  : static_cast<char*>(device_buf_.get()) + offsets[i];
  }
}

const Tensor& StateStore::get(const std::string& name) const {
  auto it = host_.find(name);
  if (it == host_.end()) fail("no state tensor named '" + name + "'");
  sync_host();
  return it->second.view;
}

void StateStore::sync_host() const {
  if (!host_stale_) return;
  for (auto& [name, t] : host_) device_.download(t.view.data, device_ptr_.at(name), t.view.nbytes());
  host_stale_ = false;
}

void StateStore::set(const std::string& name, const Tensor& v) {
  auto it = host_.find(name);
  if (it == host_.end()) fail("no state tensor named '" + name + "'");
  if (v.type() != it->second.view.type())
    fail("state '" + name + "' is " + it->second.view.type().str() + ", got " + v.type().str());
  sync_host();  // the other tensors' host copies stay current
  std::memcpy(it->second.view.data, v.data, v.nbytes());
  if (!host_memory_) device_.upload(device_ptr_.at(name), v.data, v.nbytes());
}

}  // namespace ts

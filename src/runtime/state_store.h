// A session's state (parameters, buffers, optimizer state) by name: a host
// copy that the API reads and writes, and the device memory the steps read
// and renew. One implementation for every device: where the device's memory
// is the host's (Target::host_memory, the CPU), the host tensors are the
// device state and nothing is copied; elsewhere the host copy is read back
// when a step has renewed the device state since.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/program.h"
#include "runtime/device.h"

namespace ts {

class StateStore {
 public:
  // `holds`: which of p's state tensors this store keeps (a sharded
  // optimizer's rank keeps only its own optimizer state); empty: all.
  StateStore(const Program& p, ComputeDevice& device, bool host_memory,
             const std::function<bool(const std::string&)>& holds = {});

  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return host_.count(name) != 0; }
  // The host copy, current (read back first if a step renewed the state).
  const Tensor& get(const std::string& name) const;
  // Copies v in, on the host and the device; checks its type.
  void set(const std::string& name, const Tensor& v);
  // A step ran: it may have renewed the device state.
  void renewed() { host_stale_ = !host_memory_; }
  void sync_host() const;

  // What the steps bind: the host tensors (renewal targets) and, by name,
  // the device memory of each state tensor.
  std::map<std::string, HostTensor>& host() { return host_; }
  const std::map<std::string, HostTensor>& host() const { return host_; }
  const std::map<std::string, void*>& device() const { return device_ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  ComputeDevice& device_;
  bool host_memory_;
  std::vector<std::string> names_;
  mutable std::map<std::string, HostTensor> host_;
  std::shared_ptr<void> device_buf_;  // one allocation for all state (off the host)
  std::map<std::string, void*> device_ptr_;
  mutable bool host_stale_ = false;
  size_t bytes_ = 0;
};

}  // namespace ts

#include "runtime/cpu_device.h"

#include <cstring>

#include "runtime/nonfinite.h"

namespace ts {

CpuStep::CpuStep(const Function& f, MemoryPlan plan, int threads, Collective* collective)
    : ex_(f, threads, std::move(plan), collective), bound_(f.inputs.size()) {
  for (size_t j = 0; j < f.outputs.size(); ++j) {
    const Port& p = f.outputs[j];
    if (p.role != Role::State) continue;
    const int in = f.find_input(Role::State, p.state);
    if (in < 0) fail(f.name + ": new state '" + p.state + "' has no state input");
    renew_.push_back({int(j), in, f.inputs[in].value != p.value});
    renew_bytes_ += p.type.nbytes();
  }
}

void CpuStep::bind_host_input(int i, const void* host) {
  // Bound inputs are only read (donation writes state inputs only).
  bound_[i] = const_cast<void*>(host);
  ex_.bind_input(i, bound_[i]);
}

void CpuStep::bind_device_input(int i, void* device) {
  bound_[i] = device;
  ex_.bind_input(i, device);
}

bool CpuStep::in_state(const void* p) const {
  for (const Renewal& r : renew_) {
    const char* base = static_cast<const char*>(bound_[r.in]);
    if (p >= base && p < base + ex_.function().inputs[r.in].type.nbytes()) return true;
  }
  return false;
}

// New state goes back into the state inputs (outputs written in place are
// skipped). A new value may *be* another state's old buffer (after
// simplification, `new_b = old_a`): such values are staged first, so no copy
// reads a buffer this loop already overwrote.
void CpuStep::commit_state() {
  size_t staged = 0;
  for (const Renewal& r : renew_) {
    const Tensor& src = ex_.output(r.out);
    if (src.data == bound_[r.in] || !in_state(src.data)) continue;
    if (staging_.size() < renew_bytes_) staging_ = Buffer(renew_bytes_);  // once, if ever
    std::memcpy(static_cast<char*>(staging_.data()) + staged, src.data, src.nbytes());
    staged += src.nbytes();
  }
  size_t off = 0;
  for (const Renewal& r : renew_) {
    const Tensor& src = ex_.output(r.out);
    if (src.data == bound_[r.in]) continue;
    if (in_state(src.data)) {
      std::memcpy(bound_[r.in], static_cast<char*>(staging_.data()) + off, src.nbytes());
      off += src.nbytes();
    } else {
      std::memcpy(bound_[r.in], src.data, src.nbytes());
    }
  }
}

int CpuStep::first_nonfinite_state() const {
  for (const Renewal& r : renew_)
    if (r.changed && first_nonfinite(ex_.output(r.out), ex_.threads()) >= 0) return r.out;
  return -1;
}

std::shared_ptr<void> CpuDevice::alloc(size_t bytes) {
  auto b = std::make_shared<Buffer>(bytes);
  return std::shared_ptr<void>(b, b->data());
}

void CpuDevice::upload(void* device, const void* host, size_t bytes) {
  if (device != host) std::memcpy(device, host, bytes);
}

void CpuDevice::download(void* host, const void* device, size_t bytes) {
  if (device != host) std::memcpy(host, device, bytes);
}

std::unique_ptr<DeviceStep> CpuDevice::compile(const Function& f, MemoryPlan plan) {
  return std::make_unique<CpuStep>(f, std::move(plan), threads_, collective_);
}

std::unique_ptr<ComputeDevice> open_cpu_device(int threads, Collective* collective) {
  return std::make_unique<CpuDevice>(threads, collective);
}

}  // namespace ts

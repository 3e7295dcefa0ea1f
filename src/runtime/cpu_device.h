// The CPU as a ComputeDevice: its memory is the host's, and its steps run
// on the Executor. The state a step renews goes back by commit_state(), after
// the session has checked it, so a non-finite step can be dropped.
#pragma once
#include <memory>
#include <vector>

#include "runtime/device.h"
#include "runtime/executor.h"

namespace ts {

class CpuStep : public DeviceStep {
 public:
  CpuStep(const Function& f, MemoryPlan plan, int threads, Collective* collective);
  void bind_host_input(int i, const void* host) override;
  void bind_device_input(int i, void* device) override;
  void run() override { ex_.run(); }
  void commit_state() override;
  const Tensor& output(int i) const override { return ex_.output(i); }
  int first_nonfinite_state() const override;
  size_t device_bytes() const override { return ex_.arena_bytes(); }
  std::string describe() const override { return {}; }
  void set_profiling(bool on) override { ex_.set_profiling(on); }
  const std::vector<NodeTime>& profile() const override { return ex_.profile(); }
  Executor* executor() override { return &ex_; }

 private:
  struct Renewal {
    int out, in;   // output port, the state input port it renews
    bool changed;  // not the state passed through unchanged
  };
  bool in_state(const void* p) const;  // inside a bound state input
  Executor ex_;
  std::vector<Renewal> renew_;
  std::vector<void*> bound_;  // per input port: the memory bound to it
  Buffer staging_;            // see commit_state
  size_t renew_bytes_ = 0;
};

class CpuDevice : public ComputeDevice {
 public:
  CpuDevice(int threads, Collective* collective) : threads_(threads), collective_(collective) {}
  std::string name() const override { return "cpu"; }
  std::shared_ptr<void> alloc(size_t bytes) override;
  void upload(void* device, const void* host, size_t bytes) override;
  void download(void* host, const void* device, size_t bytes) override;
  std::unique_ptr<DeviceStep> compile(const Function& f, MemoryPlan plan) override;

 private:
  int threads_;
  Collective* collective_;
};

}  // namespace ts

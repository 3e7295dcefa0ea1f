// A device as the runtime sees it: memory for the session's state, and step
// functions compiled for it. The CPU is one (runtime/cpu_device.cpp), and
// the CUDA backend (src/cuda/) implements another; the runtime knows nothing
// of CUDA. What a device can do is its Target (passes/target.h).
//
// A device step binds its inputs once: state inputs to device memory (the
// session's device copy of the state), the per-step inputs (batch, LR, seed,
// RNG offset) to host memory that each run() reads. New state goes back
// into the state it renews: by run() itself (CUDA, inside its graph), or by
// commit_state() (the CPU, so that a non-finite step can be dropped). Every
// other output is in host memory after run(), where output() reads it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ir/program.h"
#include "runtime/memory_plan.h"
#include "runtime/node_io.h"
#include "trainstep/options.h"

namespace ts {

class Executor;

class DeviceStep {
 public:
  virtual ~DeviceStep() = default;
  // Input i is read from this host memory at every run().
  virtual void bind_host_input(int i, const void* host) = 0;
  // Input i lives in device memory; a new-state output of the same state
  // is written back into it.
  virtual void bind_device_input(int i, void* device) = 0;
  // Runs the step and waits for it.
  virtual void run() = 0;
  // After run(): new state that was not written in place goes into the
  // state input it renews. Nothing where run() did that itself.
  virtual void commit_state() {}
  // After run(): a non-state output, in host memory.
  virtual const Tensor& output(int i) const = 0;
  // After run(): the first state output holding a NaN or inf (output
  // index), or -1. Checked on the device, so the state stays there.
  virtual int first_nonfinite_state() const = 0;
  // Device memory the step holds (arena and input copies).
  virtual size_t device_bytes() const = 0;
  // One line for `bench`: kernels per step, how the step is launched.
  virtual std::string describe() const = 0;
  // Per-node device time, accumulated over runs while on. Profiled runs
  // launch kernel by kernel (no graph), timed by device events.
  virtual void set_profiling(bool on) = 0;
  virtual const std::vector<NodeTime>& profile() const = 0;
  // The CPU's executor (kernel choices, verify's node-by-node trace); null
  // on other devices.
  virtual Executor* executor() { return nullptr; }
};

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0 (NVIDIA H200)"
  // Device memory, freed with the returned pointer.
  virtual std::shared_ptr<void> alloc(size_t bytes) = 0;
  virtual void upload(void* device, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* device, size_t bytes) = 0;
  // f optimised for this device (optimize_for), with its memory plan.
  virtual std::unique_ptr<DeviceStep> compile(const Function& f, MemoryPlan plan) = 0;
};

// The device d names. `threads` (0: OpenMP's default) and `collective`
// (the ranks of a data-parallel step's all-reduce nodes) are the CPU's.
// Throws ts::Error when this build has no such backend, or the machine no
// such device.
std::unique_ptr<ComputeDevice> open_device(Device d, int threads = 0,
                                           Collective* collective = nullptr);

// The ops device d has kernels for (needs no device present); empty when
// this build has no backend for d.
std::vector<std::string> device_kernel_ops(Device d);

}  // namespace ts

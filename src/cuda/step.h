// One step function compiled for the GPU (runtime/device.h's DeviceStep).
//
// compile: one kernel per node (the kernel table), values placed by the
// memory plan in one device arena, and a device copy slot plus a pinned
// host staging slot for each input that comes from the host (batch, LR,
// seed, RNG offset). The first run() records the whole step into one CUDA
// graph: the input copies, every kernel, the write-back of new state that
// was not donated, the NaN/inf check of the new state, and the copies of
// the other outputs (loss, eval outputs) to pinned host memory. (That first
// run itself goes uncaptured, so CUDA loads every kernel module before the
// recording.) Each later run() copies the bound host inputs into the pinned slots, launches the
// graph once and waits: no allocation, no per-kernel launch.
//
// TRAINSTEP_CUDA_DEBUG=1 runs the kernels one by one without a graph,
// synchronising after each, so an error names its node.
#pragma once
#include <memory>
#include <vector>

#include "cuda/handles.h"
#include "runtime/device.h"
#include "runtime/node_io.h"

namespace ts::cuda {

class CudaStep : public DeviceStep {
 public:
  CudaStep(const Function& f, MemoryPlan plan, std::shared_ptr<Handles> h);
  ~CudaStep() override;
  void bind_host_input(int i, const void* host) override;
  void bind_device_input(int i, void* device) override;
  void run() override;
  const Tensor& output(int i) const override;
  int first_nonfinite_state() const override;
  size_t device_bytes() const override { return device_bytes_; }
  std::string describe() const override;
  void set_profiling(bool on) override;
  const std::vector<NodeTime>& profile() const override { return times_; }

 private:
  void resolve();               // value pointers from the plan and the bindings
  void enqueue();               // the whole step on the stream
  void capture();               // enqueue() recorded as the graph
  std::string where() const;    // "train_step on cuda:0 (...)"

  struct Step {
    const Node* node;
    std::unique_ptr<Kernel> kernel;
    NodeIO io;
  };
  struct HostInput {
    int port, value;
    size_t offset, bytes;     // in io_ (device) and staging_ (pinned)
    const void* host = nullptr;
  };
  struct StateOut {
    int port, value;
    int input_value;          // the state input it renews
    bool check;               // float, and changed by the step
  };
  struct HostOut {
    int port, value;
    size_t offset;            // in out_ (pinned)
  };

  const Function& f_;
  MemoryPlan plan_;
  std::shared_ptr<Handles> h_;
  std::vector<Tensor> values_;  // device pointers
  std::vector<Step> steps_;
  std::vector<HostInput> host_in_;
  std::vector<StateOut> state_out_;
  std::vector<HostOut> host_out_;
  std::vector<Tensor> outputs_;  // per output port: host views (non-state)
  DeviceBuffer arena_, io_, workspace_, flags_, staging_dev_;
  PinnedBuffer staging_, out_, flags_host_;
  size_t workspace_bytes_ = 0, staging_dev_bytes_ = 0, device_bytes_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t graph_nodes_ = 0;
  bool dirty_ = true;  // pointers changed since the graph was recorded
  bool debug_ = false;
  bool profiling_ = false;
  std::vector<cudaEvent_t> events_;  // two per step node, while profiling
  std::vector<NodeTime> times_;
};

}  // namespace ts::cuda

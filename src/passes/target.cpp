#include "passes/target.h"

#include "trainstep/error.h"

namespace ts {

namespace {

Target cpu_target() {
  Target t;
  t.device = Device::Cpu;
  t.blocked_layouts = t.relu_fusion = t.batched_transpose = t.merged_products =
      t.composed_views = true;  // oneDNN's forms and the hand-written strided kernels
  t.batch_norm_groups = true;
  t.grad_steps = t.data_parallel = t.skip_nonfinite = t.host_memory = true;
  t.bf16 = true;  // oneDNN's bfloat16 products, float32 kernels between conversions elsewhere
  return t;
}

// The CUDA kernels take plain layouts and the unfused ops. Its matmul takes
// rank 2 (cuBLASLt's layouts would take rank 3, but no GPU has run that yet),
// its as_strided has not run composed (stride-0) gathers, and merged sums
// are not yet measured with cuBLAS. Each step is one CUDA graph that writes
// the new state back itself, so a step cannot be dropped after it ran. Its
// kernels have no bfloat16 forms yet.
Target cuda_target() {
  Target t;
  t.device = Device::Cuda;
  return t;
}

}  // namespace

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  fail("unknown device '" + name + "' (expected cpu or cuda)");
}

const char* device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

const Target& target_of(Device d) {
  static const Target cpu = cpu_target(), cuda = cuda_target();
  return d == Device::Cuda ? cuda : cpu;
}

std::string devices_with(bool Target::*field) {
  std::string r;
  for (Device d : {Device::Cpu, Device::Cuda})
    if (target_of(d).*field) r += std::string(r.empty() ? "" : " and ") + device_name(d);
  return r;
}

}  // namespace ts

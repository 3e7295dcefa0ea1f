#include "runtime/device.h"

namespace ts {

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  fail("unknown device '" + name + "' (expected cpu or cuda)");
}

const char* device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

#ifdef TRAINSTEP_HAVE_CUDA
std::unique_ptr<ComputeDevice> open_cuda_device();  // src/cuda/device.cpp
std::vector<std::string> cuda_kernel_ops();
#endif

std::vector<std::string> device_kernel_ops(Device d) {
#ifdef TRAINSTEP_HAVE_CUDA
  if (d == Device::Cuda) return cuda_kernel_ops();
#endif
  (void)d;
  return {};
}

std::unique_ptr<ComputeDevice> open_device(Device d) {
  if (d == Device::Cpu) fail("open_device: the CPU is not a separate device");
#ifdef TRAINSTEP_HAVE_CUDA
  return open_cuda_device();
#else
  fail("--device cuda: this trainstep was built without the CUDA backend (rebuild with cmake "
       "-DTRAINSTEP_WITH_CUDA=ON, which needs the CUDA toolkit with cuBLAS and cuDNN)");
#endif
}

}  // namespace ts

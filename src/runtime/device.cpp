#include "runtime/device.h"

namespace ts {

std::unique_ptr<ComputeDevice> open_cpu_device(int threads, Collective* collective);

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

std::unique_ptr<ComputeDevice> open_device(Device d, int threads, Collective* collective) {
  if (d == Device::Cpu) return open_cpu_device(threads, collective);
#ifdef TRAINSTEP_HAVE_CUDA
  return open_cuda_device();
#else
  fail("--device cuda: this trainstep was built without the CUDA backend (rebuild with cmake "
       "-DTRAINSTEP_WITH_CUDA=ON, which needs the CUDA toolkit with cuBLAS and cuDNN)");
#endif
}

}  // namespace ts

// The CUDA objects a device's steps share: one stream (steps run one after
// another, as the session calls them), the cuBLASLt and cuDNN handles.
#pragma once
#include <memory>
#include <string>

#include "cuda/kernel.h"

namespace ts::cuda {

struct Handles {
  Handles();  // on device 0; throws ts::Error when there is none
  ~Handles();
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  int device = 0;
  std::string name;  // "cuda:0 (NVIDIA H200)"
  cudaStream_t stream = nullptr;
  cublasLtHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
};

// Device memory, freed by cudaFree.
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
DeviceBuffer device_alloc(size_t bytes, const std::string& what);

// Page-locked host memory (cudaMallocHost): what graph-captured copies to
// and from the host need.
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using PinnedBuffer = std::unique_ptr<void, PinnedFree>;
PinnedBuffer pinned_alloc(size_t bytes, const std::string& what);

}  // namespace ts::cuda

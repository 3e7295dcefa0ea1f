// The CUDA device: handles, state memory, and step compilation (step.cpp).
#include "cuda/handles.h"
#include "cuda/step.h"
#include "runtime/device.h"

namespace ts {

namespace cuda {

Handles::Handles() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    fail(std::string("--device cuda: no usable CUDA device (") +
         (e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                           : std::string("no GPU found")) +
         ")");
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  name = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasLtCreate(&blas), "cublasLtCreate");
  check(cudnnCreate(&dnn), "cudnnCreate");
  check(cudnnSetStream(dnn, stream), "cudnnSetStream");
}

Handles::~Handles() {
  if (dnn) cudnnDestroy(dnn);
  if (blas) cublasLtDestroy(blas);
  if (stream) cudaStreamDestroy(stream);
}

DeviceBuffer device_alloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc " + bytes_str(bytes) + " for " + what);
  return DeviceBuffer(p);
}

PinnedBuffer pinned_alloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes ? bytes : 1), "cudaMallocHost " + bytes_str(bytes) + " for " + what);
  return PinnedBuffer(p);
}

namespace {

class CudaDevice : public ComputeDevice {
 public:
  CudaDevice() : h_(std::make_shared<Handles>()) {}
  std::string name() const override { return h_->name; }
  std::shared_ptr<void> alloc(size_t bytes) override {
    return std::shared_ptr<void>(device_alloc(bytes, "state").release(), DeviceFree());
  }
  void upload(void* device, const void* host, size_t bytes) override {
    check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "upload state");
  }
  void download(void* host, const void* device, size_t bytes) override {
    check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "download state");
  }
  std::unique_ptr<DeviceStep> compile(const Function& f, MemoryPlan plan) override {
    return std::make_unique<CudaStep>(f, std::move(plan), h_);
  }

 private:
  std::shared_ptr<Handles> h_;
};

}  // namespace

}  // namespace cuda

std::unique_ptr<ComputeDevice> open_cuda_device() { return std::make_unique<cuda::CudaDevice>(); }

std::vector<std::string> cuda_kernel_ops() {
  std::vector<std::string> ops = cuda::KernelTable::get().ops();
  // Views run no kernel on any device.
  for (const OpDef& d : OpRegistry::get().all())
    if (d.alias_input0) ops.push_back(d.name);
  return ops;
}

}  // namespace ts

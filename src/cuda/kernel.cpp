#include "cuda/kernel.h"

#include <algorithm>

namespace ts::cuda {

const KernelTable& KernelTable::get() {
  static const KernelTable table = [] {
    KernelTable t;
    register_pointwise(t);
    register_matmul(t);
    register_conv(t);
    register_pool(t);
    register_norm(t);
    register_reduce(t);
    register_softmax(t);
    register_shape(t);
    register_index(t);
    register_random(t);
    register_creation(t);
    return t;
  }();
  return table;
}

const OpDef& Build::op() const {
  if (def) return *def;
  const OpDef* d = OpRegistry::get().find(node().op());
  if (!d) node().fail("CUDA: unknown op");
  return *d;
}

const MakeKernel* KernelTable::find(const OpDef& op) const {
  auto it = by_op_.find(&op);
  return it == by_op_.end() ? nullptr : &it->second;
}

const MakeKernel* KernelTable::find(const std::string& op) const {
  const OpDef* d = OpRegistry::get().find(op);
  return d ? find(*d) : nullptr;
}

std::vector<std::string> KernelTable::ops() const {
  std::vector<std::string> r;
  for (const auto& [op, m] : by_op_) r.push_back(op->name);
  std::sort(r.begin(), r.end());
  return r;
}

void KernelTable::add(const OpDef& op, MakeKernel make) {
  if (!by_op_.emplace(&op, make).second) fail("CUDA kernel for '" + op.name + "' registered twice");
}

void KernelTable::add(const std::string& op, MakeKernel make) {
  const OpDef* d = OpRegistry::get().find(op);
  if (!d) fail("CUDA kernel for '" + op + "': no such op in the registry");
  add(*d, make);
}

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    fail("CUDA: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail("cuBLAS: " + what + ": " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) +
         ")");
}

void check(cudnnStatus_t s, const std::string& what) {
  if (s != CUDNN_STATUS_SUCCESS) fail("cuDNN: " + what + ": " + cudnnGetErrorString(s));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), std::string("launch ") + kernel); }

}  // namespace ts::cuda

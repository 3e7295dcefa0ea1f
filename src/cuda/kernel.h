// The CUDA backend's kernel interface. Each op with a CUDA kernel registers
// a factory here against its OpDef (ops/op.h), whose semantics (plans,
// geometry, pointwise codes) the host code reads; the step compiler (step.cpp) builds one
// kernel per node at compile time and records every kernel's launches into
// one CUDA graph. Host-side files (.cpp) read the node's attributes and
// types; the device code (.cu) sees plain structs only (launch.h).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"

namespace ts::cuda {

// What run() gets: the step's stream and the shared library handles.
struct Ctx {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  void* workspace = nullptr;  // scratch shared by all kernels (they run one at a time)
  size_t workspace_bytes = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Enqueues the node's work on ctx.stream. Runs under stream capture: it
  // must not allocate, synchronise or read device memory from the host.
  // As ts::Kernel: an absent input and an output nobody reads have data
  // nullptr.
  virtual void run(const Tensor* in, Tensor* out, const Ctx& ctx) = 0;
  // Bytes of ctx.workspace run() needs.
  virtual size_t workspace_bytes() const { return 0; }
};

// Compile-time context: the node (attrs, input and output types) and the
// library handles, for planning (cuDNN algorithm choice, cuBLASLt plans).
struct Build {
  const KernelCtx& k;
  cudnnHandle_t dnn = nullptr;
  cublasLtHandle_t blas = nullptr;
  const OpDef* def = nullptr;  // the node's op; null: looked up by the node's op name
  const NodeCtx& node() const { return k.node; }
  const std::vector<TensorType>& outputs() const { return k.outputs; }
  const OpDef& op() const;
};

using MakeKernel = std::unique_ptr<Kernel> (*)(const Build&);

// Keyed by OpDef: a family registers against the ops it implements, found
// by what the op declares (pointwise codes, strided views) or by name once.
class KernelTable {
 public:
  static const KernelTable& get();  // every family registered, built once
  const MakeKernel* find(const OpDef& op) const;
  const MakeKernel* find(const std::string& op) const;  // by registry name (tests)
  std::vector<std::string> ops() const;                 // the ops' names, sorted
  void add(const OpDef& op, MakeKernel make);           // fails on a duplicate
  void add(const std::string& op, MakeKernel make);     // the registry's op of that name

 private:
  std::map<const OpDef*, MakeKernel> by_op_;
};

// One per kernel family file; KernelTable::get() calls each.
void register_pointwise(KernelTable& t);
void register_matmul(KernelTable& t);
void register_conv(KernelTable& t);
void register_pool(KernelTable& t);
void register_norm(KernelTable& t);
void register_reduce(KernelTable& t);
void register_softmax(KernelTable& t);
void register_shape(KernelTable& t);
void register_index(KernelTable& t);
void register_random(KernelTable& t);
void register_creation(KernelTable& t);

// Errors: a failed CUDA, cuBLAS or cuDNN call throws ts::Error naming what
// was being done and the library's own message.
void check(cudaError_t e, const std::string& what);
void check(cublasStatus_t s, const std::string& what);
void check(cudnnStatus_t s, const std::string& what);
// After a kernel launch: the launch's own error (bad configuration).
void check_launch(const char* kernel);

// A kernel object from a lambda over (in, out, ctx).
template <class F>
class FnKernel : public Kernel {
 public:
  explicit FnKernel(F f, size_t ws = 0) : f_(std::move(f)), ws_(ws) {}
  void run(const Tensor* in, Tensor* out, const Ctx& c) override { f_(in, out, c); }
  size_t workspace_bytes() const override { return ws_; }

 private:
  F f_;
  size_t ws_;
};
template <class F>
std::unique_ptr<Kernel> fn_kernel(F f, size_t ws = 0) {
  return std::make_unique<FnKernel<F>>(std::move(f), ws);
}

}  // namespace ts::cuda

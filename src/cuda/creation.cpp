// Ops whose value is known at compile time (OpDef::constant: literals and
// immediates; OpDef::shape_only: zeros_like, new_full, arange, ...): the
// CPU kernel computes the value once, it is uploaded once, and each step
// copies it device to device into the output (the output's arena slot is
// shared with other values, so the copy is needed every step).
#include "cuda/kernel.h"
#include "ops/creation.h"

namespace ts::cuda {

namespace {

class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(const Build& b) {
    const NodeCtx& node = b.node();
    const TensorType& t = b.outputs().at(0);
    bytes_ = t.nbytes();
    HostTensor v(t.dtype, t.shape);
    // shape_only ops read their inputs' types, never their data.
    std::vector<Tensor> in(node.num_inputs());
    for (int k = 0; k < node.num_inputs(); ++k)
      if (node.has_input(k)) {
        in[k].dtype = node.input(k).dtype;
        in[k].shape = node.input(k).shape;
      }
    std::vector<Tensor> out(b.outputs().size());
    out[0] = v.view;
    OpRegistry::get().find(node.op())->make(b.k)->run(in.data(), out.data());
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(bytes_, 1)), "constant of node '" + node.node() + "'");
    value_.reset(p);
    check(cudaMemcpy(p, v.view.data, bytes_, cudaMemcpyHostToDevice), "upload a constant");
  }
  void run(const Tensor*, Tensor* out, const Ctx& c) override {
    if (!out[0].data || bytes_ == 0) return;
    check(cudaMemcpyAsync(out[0].data, value_.get(), bytes_, cudaMemcpyDeviceToDevice, c.stream),
          "copy a constant");
  }

 private:
  struct Free {
    void operator()(void* p) const { cudaFree(p); }
  };
  std::unique_ptr<void, Free> value_;
  size_t bytes_ = 0;
};

std::unique_ptr<Kernel> make_constant(const Build& b) { return std::make_unique<ConstantKernel>(b); }

}  // namespace

void register_creation(KernelTable& t) {
  for (const OpDef& d : OpRegistry::get().all())
    if ((d.constant != ConstRole::None || d.shape_only) && !d.random) t.add(d.name, &make_constant);
  // No inputs at all: their attributes give the value.
  for (const char* op : {opname::full, opname::zeros, opname::arange,
                         opname::arange_start_step})
    t.add(op, &make_constant);
}

}  // namespace ts::cuda

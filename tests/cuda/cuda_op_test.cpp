#include "cuda_op_test.h"

#include <sstream>

#include "trainstep/bfloat16.h"

namespace ts_cuda_test {

bool have_gpu() {
  static const bool ok = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return ok;
}

const ts::cuda::Ctx& test_ctx() {
  static ts::cuda::Ctx c = [] {
    ts::cuda::Ctx c;
    ts::cuda::check(cudaStreamCreate(&c.stream), "stream");
    ts::cuda::check(cublasLtCreate(&c.blas), "cublasLtCreate");
    ts::cuda::check(cudnnCreate(&c.dnn), "cudnnCreate");
    ts::cuda::check(cudnnSetStream(c.dnn, c.stream), "cudnnSetStream");
    c.workspace_bytes = size_t(256) << 20;
    ts::cuda::check(cudaMalloc(&c.workspace, c.workspace_bytes), "workspace");
    return c;
  }();
  return c;
}

ts::HostTensor random_tensor(ts::DType dt, const ts::Shape& shape, std::mt19937& rng, double lo,
                             double hi) {
  ts::HostTensor t(dt, shape);
  const int64_t n = t.view.numel();
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    const double v = u(rng);
    switch (dt) {
      case ts::DType::F32: t.view.as<float>()[i] = float(v); break;
      case ts::DType::F64: t.view.as<double>()[i] = v; break;
      case ts::DType::I64: t.view.as<int64_t>()[i] = int64_t(std::floor(v)); break;
      case ts::DType::I32: t.view.as<int32_t>()[i] = int32_t(std::floor(v)); break;
      case ts::DType::U8: t.view.as<uint8_t>()[i] = uint8_t(std::floor(v)); break;
      case ts::DType::Bool: t.view.as<uint8_t>()[i] = rng() & 1; break;
      case ts::DType::BF16: t.view.as<uint16_t>()[i] = ts::float_to_bf16(float(v)); break;
    }
  }
  return t;
}

namespace {

double element(const ts::Tensor& t, int64_t i) {
  switch (t.dtype) {
    case ts::DType::F32: return t.as<float>()[i];
    case ts::DType::F64: return t.as<double>()[i];
    case ts::DType::I64: return double(t.as<int64_t>()[i]);
    case ts::DType::I32: return t.as<int32_t>()[i];
    default: return t.as<uint8_t>()[i];
  }
}

}  // namespace

::testing::AssertionResult cpu_gpu_agree(const std::string& op, const json& attrs,
                                         const std::vector<const ts::HostTensor*>& inputs,
                                         Tolerance tol, std::vector<int> skip) {
  using namespace ts;
  const OpDef* def = OpRegistry::get().find(op);
  if (!def) return ::testing::AssertionFailure() << op << " is not registered";
  std::vector<TensorType> types;
  std::vector<bool> present;
  for (const HostTensor* t : inputs) {
    types.push_back(t ? t->view.type() : TensorType{});
    present.push_back(t != nullptr);
  }
  NodeCtx node("n0", op, attrs, types, present);
  std::vector<TensorType> out_types = def->infer(node);
  KernelCtx kc{node, out_types, 1};

  // CPU.
  std::vector<HostTensor> want;
  std::vector<Tensor> in, out;
  for (const HostTensor* t : inputs) in.push_back(t ? t->view : Tensor{});
  for (const TensorType& t : out_types) want.emplace_back(t.dtype, t.shape);
  for (auto& w : want) out.push_back(w.view);
  if (!def->alias_input0) def->make(kc)->run(in.data(), out.data());
  else std::memcpy(want[0].view.data, inputs[0]->view.data, want[0].view.nbytes());

  // GPU.
  const cuda::MakeKernel* make = cuda::KernelTable::get().find(op);
  if (!make) return ::testing::AssertionFailure() << op << " has no CUDA kernel";
  const cuda::Ctx& ctx = test_ctx();
  cuda::Build b{kc, ctx.dnn, ctx.blas};
  std::unique_ptr<cuda::Kernel> k = (*make)(b);
  if (k->workspace_bytes() > ctx.workspace_bytes)
    return ::testing::AssertionFailure() << "workspace " << k->workspace_bytes() << " too large";
  std::vector<void*> bufs;
  std::vector<Tensor> din, dout;
  for (const HostTensor* t : inputs) {
    Tensor d = t ? t->view : Tensor{};
    if (t) {
      void* p = nullptr;
      cuda::check(cudaMalloc(&p, std::max<size_t>(t->view.nbytes(), 1)), "test input");
      cuda::check(cudaMemcpy(p, t->view.data, t->view.nbytes(), cudaMemcpyHostToDevice), "H2D");
      d.data = p;
      bufs.push_back(p);
    }
    din.push_back(d);
  }
  for (const TensorType& t : out_types) {
    Tensor d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    void* p = nullptr;
    cuda::check(cudaMalloc(&p, std::max<size_t>(t.nbytes(), 1)), "test output");
    cuda::check(cudaMemset(p, 0xff, t.nbytes()), "poison");  // NaN for floats
    d.data = p;
    bufs.push_back(p);
    dout.push_back(d);
  }
  k->run(din.data(), dout.data(), ctx);
  cuda::check(cudaStreamSynchronize(ctx.stream), "kernel " + op);
  std::vector<HostTensor> got;
  for (size_t j = 0; j < out_types.size(); ++j) {
    got.emplace_back(out_types[j].dtype, out_types[j].shape);
    cuda::check(cudaMemcpy(got[j].view.data, dout[j].data, out_types[j].nbytes(),
                           cudaMemcpyDeviceToHost),
                "D2H");
  }
  for (void* p : bufs) cudaFree(p);

  for (size_t j = 0; j < out_types.size(); ++j) {
    if (std::find(skip.begin(), skip.end(), int(j)) != skip.end()) continue;
    const Tensor& g = got[j].view;
    const Tensor& w = want[j].view;
    const bool exact = !dtype_is_float(g.dtype);
    double worst = 0;
    for (int64_t i = 0; i < g.numel(); ++i) {
      const double a = element(g, i), e = element(w, i);
      if ((std::isnan(a) && std::isnan(e)) || a == e) continue;  // a == e: equal infinities too
      const bool ok = exact ? a == e : std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
      if (!ok)
        return ::testing::AssertionFailure()
               << op << " output " << j << " " << out_types[j].str() << " element " << i
               << ": gpu " << a << ", cpu " << e;
      worst = std::max(worst, std::fabs(a - e));
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ts_cuda_test

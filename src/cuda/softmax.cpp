// CUDA kernels of softmax / log_softmax and their gradients along one dim
// (device code in softmax.cu): the tensor viewed as [O, R, I], R the dim.
#include "cuda/kernel.h"
#include "cuda/rows.h"
#include "ops/softmax.h"

namespace ts::cuda {

namespace {

SoftmaxParams plan_lines(const NodeCtx& n, bool log) {
  const TensorType& x = n.input(0);
  if (x.dtype != DType::F32 && x.dtype != DType::F64)
    n.fail("CUDA: softmax needs float32 or float64, got " + x.str());
  SoftmaxParams p;
  p.f64 = x.dtype == DType::F64;
  p.log = log;
  const SoftmaxLines l = softmax_lines(n, x.shape);  // the CPU op's
  p.O = l.O;
  p.R = l.R;
  p.I = l.I;
  p.threads = rowk::row_threads(p.R);
  return p;
}

// Input: self; attrs dim, half_to_float (false: float16 is not supported).
template <bool Log>
std::unique_ptr<Kernel> make_forward(const Build& b) {
  const NodeCtx& n = b.node();
  if (n.has_attr("half_to_float") && n.attr_bool("half_to_float"))
    n.fail("CUDA: half_to_float is not supported");
  const SoftmaxParams plan = plan_lines(n, Log);
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    SoftmaxParams p = plan;
    p.x = in[0].data;
    p.out = out[0].data;
    launch_softmax(p, ctx.stream);
    check_launch(Log ? "_log_softmax" : "_softmax");
  });
}

// Inputs: grad_output, output (the forward's); attrs dim, input_dtype.
template <bool Log>
std::unique_ptr<Kernel> make_backward(const Build& b) {
  const NodeCtx& n = b.node();
  if (n.input(1) != n.input(0)) n.fail("CUDA: output must match grad_output");
  const SoftmaxParams plan = plan_lines(n, Log);
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    SoftmaxParams p = plan;
    p.x = in[0].data;
    p.y = in[1].data;
    p.out = out[0].data;
    launch_softmax_backward(p, ctx.stream);
    check_launch(Log ? "_log_softmax_backward_data" : "_softmax_backward_data");
  });
}

}  // namespace

void register_softmax(KernelTable& t) {
  t.add(opname::softmax, make_forward<false>);
  t.add(opname::log_softmax, make_forward<true>);
  t.add(opname::softmax_backward, make_backward<false>);
  t.add(opname::log_softmax_backward, make_backward<true>);
}

}  // namespace ts::cuda

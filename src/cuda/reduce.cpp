// CUDA kernels of the reductions sum, mean, amax, amin (over a dim list) and
// argmax (device code in reduce.cu). The plan is the CPU's (ops/reduce.h):
// one reduced group gives [O, R, I], split along R into chunks
// when the outputs alone would leave the GPU idle; otherwise the general
// strided form.
#include "cuda/kernel.h"
#include "cuda/rows.h"
#include "ops/reduce.h"

namespace ts::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Elem elem_of(const NodeCtx& n, DType t) {
  switch (t) {
    case DType::F32: return Elem::F32;
    case DType::F64: return Elem::F64;
    case DType::I64: return Elem::I64;
    case DType::I32: return Elem::I32;
    case DType::U8:
    case DType::Bool: return Elem::U8;  // bool bytes are 0 or 1
    case DType::BF16: break;
  }
  n.fail("CUDA: unsupported dtype");
}

// The shared plan (ops/reduce.h) as the kernels' params, with mean's count.
void plan_shape(const NodeCtx& n, const Shape& in, ReduceParams& p) {
  const ReducePlan r = reduce_plan(n, in, reduced_dims(n, in));
  p.out_numel = r.out_numel;
  const int64_t numel = shape_numel(in);
  p.count = p.out_numel ? double(numel / p.out_numel) : 0.0;
  p.O = r.O;
  p.R = r.R;
  p.I = r.I;
  p.general = r.general;
  if (!r.general) return;
  if (r.nk + r.nr > kMaxRank) n.fail("CUDA: too many dims to reduce");
  p.nk = r.nk;
  p.nr = r.nr;
  for (int d = 0; d < r.nk; ++d) p.kshape[d] = r.kshape[d], p.kstride[d] = r.kstride[d];
  for (int d = 0; d < r.nr; ++d) p.rshape[d] = r.rshape[d], p.rstride[d] = r.rstride[d];
}

// Chunks of R: enough (o, chunk) work items to fill the GPU, each chunk
// long enough to be worth a pass.
void plan_split(ReduceParams& p) {
  p.P = 1;
  if (!p.general && p.R > 0) {
    if (p.I == 1) {
      if (p.O < 264 && p.R > 4096) p.P = std::min(ceil_div(264, p.O), ceil_div(p.R, 2048));
    } else if (p.O * p.I < 65536 && p.R > 64) {
      p.P = std::min(ceil_div(65536, p.O * p.I), ceil_div(p.R, 32));
    }
    p.P = std::max<int64_t>(p.P, 1);
    p.chunk = ceil_div(p.R, p.P);
    p.P = ceil_div(p.R, p.chunk);
  }
  p.threads = rowk::row_threads(std::min<int64_t>(p.chunk, 256));
}

// Inputs: self; attrs dim (list, optional), keepdim, dtype (sum/mean).
template <RedOp OP>
std::unique_ptr<Kernel> make_reduce(const Build& b) {
  const NodeCtx& n = b.node();
  const TensorType& x = n.input(0);
  const DType out = b.outputs()[0].dtype;
  ReduceParams plan;
  plan.op = OP;
  plan.in = elem_of(n, x.dtype);
  if (OP == RedOp::Max || OP == RedOp::Min) {
    if (out != x.dtype) n.fail("CUDA: amax/amin output dtype must match the input's");
    plan.ct = plan.in;
  } else {
    // The CPU computes in the output dtype; int32/uint8/bool outputs it
    // computes in int64 and casts, which these kernels do not.
    if (out != DType::F32 && out != DType::F64 && out != DType::I64)
      n.fail(std::string("CUDA: sum/mean into ") + dtype_name(out) + " is not supported");
    if (OP == RedOp::Mean && out == DType::I64) n.fail("CUDA: mean needs a float dtype");
    plan.ct = elem_of(n, out);
  }
  plan_shape(n, x.shape, plan);
  plan_split(plan);
  const size_t ws = plan.P > 1 ? static_cast<size_t>(plan.O * plan.P * plan.I) * 8 : 0;
  return fn_kernel(
      [plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
        if (!out[0].data) return;
        ReduceParams p = plan;
        p.x = in[0].data;
        p.out = out[0].data;
        p.part = ctx.workspace;
        launch_reduce(p, ctx.stream);
        check_launch("reduce");
      },
      ws);
}

// Input: self; attrs dim (null: flattened), keepdim.
std::unique_ptr<Kernel> make_argmax(const Build& b) {
  const NodeCtx& n = b.node();
  const TensorType& x = n.input(0);
  if (x.dtype == DType::Bool) n.fail("CUDA: argmax of bool is not supported");
  ArgmaxParams plan;
  plan.in = elem_of(n, x.dtype);
  const ArgmaxPlan a = argmax_plan(n, x.shape);
  plan.O = a.O;
  plan.R = a.R;
  plan.I = a.I;
  if (plan.R == 0 && plan.O * plan.I > 0) n.fail("CUDA: argmax over an empty dim");
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    ArgmaxParams p = plan;
    p.x = in[0].data;
    p.out = static_cast<int64_t*>(out[0].data);
    launch_argmax(p, ctx.stream);
    check_launch("argmax");
  });
}

}  // namespace

void register_reduce(KernelTable& t) {
  t.add(opname::sum_dim, make_reduce<RedOp::Sum>);
  t.add(opname::sum, make_reduce<RedOp::Sum>);
  t.add(opname::mean_dim, make_reduce<RedOp::Mean>);
  t.add(opname::mean, make_reduce<RedOp::Mean>);
  t.add(opname::amax, make_reduce<RedOp::Max>);
  t.add(opname::amin, make_reduce<RedOp::Min>);
  t.add(opname::argmax, make_argmax);
}

}  // namespace ts::cuda

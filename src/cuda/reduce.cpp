// CUDA kernels of the reductions sum, mean, amax, amin (over a dim list) and
// argmax (device code in reduce.cu). The plan merges adjacent dims as the CPU
// kernel does: one reduced group gives [O, R, I], split along R into chunks
// when the outputs alone would leave the GPU idle; otherwise the general
// strided form.
#include "cuda/kernel.h"
#include "cuda/rows.h"

namespace ts::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t wrap(const NodeCtx& n, int64_t d, int64_t rank) {
  const int64_t r = rank == 0 ? 1 : rank;  // a 0-d tensor takes dim 0 or -1
  if (d < -r || d >= r) n.fail("CUDA: dim " + std::to_string(d) + " out of range");
  return d < 0 ? d + r : d;
}

Elem elem_of(const NodeCtx& n, DType t) {
  switch (t) {
    case DType::F32: return Elem::F32;
    case DType::F64: return Elem::F64;
    case DType::I64: return Elem::I64;
    case DType::I32: return Elem::I32;
    case DType::U8:
    case DType::Bool: return Elem::U8;  // bool bytes are 0 or 1
  }
  n.fail("CUDA: unsupported dtype");
}

// Reduced dims from attr `dim` (absent, null or empty: all).
std::vector<bool> reduced_dims(const NodeCtx& n, const Shape& s) {
  std::vector<int64_t> dims;
  if (n.has_attr("dim")) dims = n.attr_ints("dim");
  std::vector<bool> red(s.size(), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap(n, d, static_cast<int64_t>(s.size()));
    if (s.empty()) continue;
    if (red[w]) n.fail("CUDA: dim " + std::to_string(d) + " appears more than once");
    red[w] = true;
  }
  return red;
}

void plan_shape(const NodeCtx& n, const Shape& in, const std::vector<bool>& red, ReduceParams& p) {
  // Drop size-1 dims; merge neighbours that are both kept or both reduced.
  std::vector<int64_t> sz;
  std::vector<bool> fl;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    if (!sz.empty() && fl.back() == red[d]) {
      sz.back() *= in[d];
    } else {
      sz.push_back(in[d]);
      fl.push_back(red[d]);
    }
  }
  p.out_numel = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (!red[d]) p.out_numel *= in[d];
  const int64_t numel = shape_numel(in);
  p.count = p.out_numel ? double(numel / p.out_numel) : 0.0;
  if (numel == 0) {  // every output reduces nothing (sum 0, mean NaN)
    p.O = p.out_numel;
    p.R = 0;
    p.I = 1;
    return;
  }
  int nred = 0;
  for (bool f : fl) nred += f;
  if (nred <= 1) {
    size_t i = 0;
    if (i < fl.size() && !fl[i]) p.O = sz[i++];
    if (i < fl.size() && fl[i]) p.R = sz[i++];
    if (i < fl.size() && !fl[i]) p.I = sz[i++];
    return;
  }
  if (sz.size() > static_cast<size_t>(kMaxRank)) n.fail("CUDA: too many dims to reduce");
  p.general = true;
  int64_t st = 1;
  std::vector<int64_t> stride(sz.size());
  for (size_t d = sz.size(); d-- > 0;) {
    stride[d] = st;
    st *= sz[d];
  }
  for (size_t d = 0; d < sz.size(); ++d) {
    if (fl[d]) {
      p.rshape[p.nr] = sz[d];
      p.rstride[p.nr++] = stride[d];
    } else {
      p.kshape[p.nk] = sz[d];
      p.kstride[p.nk++] = stride[d];
    }
  }
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
  plan_shape(n, x.shape, reduced_dims(n, x.shape), plan);
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
  const Shape& s = x.shape;
  plan.R = shape_numel(s);
  if (n.has_attr("dim") && !s.empty()) {
    const int64_t d = wrap(n, n.attr_int("dim"), static_cast<int64_t>(s.size()));
    plan.O = shape_numel(Shape(s.begin(), s.begin() + d));
    plan.R = s[d];
    plan.I = shape_numel(Shape(s.begin() + d + 1, s.end()));
  }
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
  t.add("aten.sum.dim_IntList", make_reduce<RedOp::Sum>);
  t.add("aten.sum.default", make_reduce<RedOp::Sum>);
  t.add("aten.mean.dim", make_reduce<RedOp::Mean>);
  t.add("aten.mean.default", make_reduce<RedOp::Mean>);
  t.add("aten.amax.default", make_reduce<RedOp::Max>);
  t.add("aten.amin.default", make_reduce<RedOp::Min>);
  t.add("aten.argmax.default", make_argmax);
}

}  // namespace ts::cuda

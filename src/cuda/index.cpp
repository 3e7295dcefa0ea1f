// CUDA kernels of the index ops: gather, scatter.value / scatter.src /
// scatter_add, index_select and index_put (one int64 index tensor on dim 0,
// as the CPU op). Semantics follow src/ops/index.cpp; the strides are
// planned here at compile time, index.cu does the rest. Out-of-range
// indices cannot fail on the device: see index.cu.
#include <cstring>
#include <string>

#include "cuda/gather.h"
#include "cuda/kernel.h"
#include "ops/broadcast.h"
#include "ops/index.h"

namespace ts::cuda {

namespace {

int elem_size(const NodeCtx& node, DType t) {
  const size_t es = dtype_size(t);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    node.fail("CUDA: element size " + std::to_string(es) + " not supported");
  return static_cast<int>(es);
}

// The atomic add for dtype t; bool and uint8 (whose CPU sums saturate or
// wrap in ways atomics do not give) are refused.
ElemOp add_op(const NodeCtx& node, DType t) {
  switch (t) {
    case DType::F32: return ElemOp::AddF32;
    case DType::F64: return ElemOp::AddF64;
    case DType::I32: return ElemOp::AddI32;
    case DType::I64: return ElemOp::AddI64;
    default: break;
  }
  node.fail(std::string("CUDA: accumulating into ") + dtype_name(t) + " not supported");
}

void copy_self(const Tensor& self, Tensor& out, cudaStream_t s) {
  if (out.data != self.data && self.nbytes())
    check(cudaMemcpyAsync(out.data, self.data, self.nbytes(), cudaMemcpyDeviceToDevice, s),
          "copy self");
}

// ---- gather / scatter: as the CPU's make_index_plan ----
IndexParams index_plan(const NodeCtx& node, const Shape* src) {
  const Shape& self = node.input(0).shape;
  const Shape& index = node.input(1).shape;
  if (node.input(1).dtype != DType::I64) node.fail("CUDA: index must be int64");
  const int64_t rank = static_cast<int64_t>(index.size());
  if (rank > kMaxRank) node.fail("CUDA: index of rank > 8 not supported");
  if (rank != static_cast<int64_t>(self.size()) && !(rank <= 1 && self.size() <= 1))
    node.fail("CUDA: index rank differs from self's");
  if (src && src->size() != index.size()) node.fail("CUDA: src rank differs from index's");
  IndexParams p;
  p.rank = static_cast<int>(rank);
  p.dim = static_cast<int>(wrap_dim(node, node.attr_int("dim"), static_cast<int64_t>(self.size())));
  if (self.empty() || index.empty()) p.dim = 0;
  p.n = shape_numel(index);
  p.D = self.empty() ? 1 : self[p.dim];
  auto ss = contiguous_strides(self);
  // From self, not from the index: a 0-d index into a 1-d self still steps
  // along self's dim.
  p.dstride = self.empty() ? 0 : ss[p.dim];
  auto rs = src ? contiguous_strides(*src) : contiguous_strides(index);
  for (int d = 0; d < p.rank; ++d) {
    if (!self.empty() && d != p.dim && index[d] > self[d]) node.fail("CUDA: index larger than self");
    if (src && index[d] > (*src)[d]) node.fail("CUDA: index larger than src");
    p.ishape[d] = index[d];
    p.sstride[d] = self.empty() ? 0 : ss[d];
    p.rstride[d] = rs[d];
  }
  p.elem = elem_size(node, node.input(0).dtype);
  return p;
}

std::unique_ptr<Kernel> make_gather(const Build& b) {
  IndexParams plan = index_plan(b.node(), nullptr);
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    IndexParams p = plan;
    p.self = in[0].data;
    p.index = static_cast<const int64_t*>(in[1].data);
    p.out = out[0].data;
    launch_gather(p, ctx.stream);
    check_launch(opname::gather);
  });
}

enum class Sc { Value, Src, Add };

template <Sc OP>
std::unique_ptr<Kernel> make_scatter(const Build& b) {
  const NodeCtx& node = b.node();
  const DType dt = node.input(0).dtype;
  const TensorType* src = OP == Sc::Value ? nullptr : &node.input(2);
  if (src && src->dtype != dt) node.fail("CUDA: scatter src of another dtype");
  IndexParams plan = index_plan(node, src ? &src->shape : nullptr);
  if (OP == Sc::Add) plan.op = add_op(node, dt);
  if (OP == Sc::Value) {
    // The element's bytes, stored as the CPU does (store_scalar), in the
    // low bytes of plan.value (both sides little-endian).
    const double v = node.attr_float("value");
    const int64_t vi =
        node.attrs().at("value").is_number_integer() ? node.attr_int("value") : int_of_float(v);
    unsigned char bytes[8] = {};
    store_scalar(bytes, dt, v, vi);
    std::memcpy(&plan.value, bytes, sizeof(plan.value));
  }
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    copy_self(in[0], out[0], ctx.stream);
    IndexParams p = plan;
    p.index = static_cast<const int64_t*>(in[1].data);
    p.src = OP == Sc::Value ? nullptr : in[2].data;
    p.out = out[0].data;
    launch_scatter(p, ctx.stream);
    check_launch("scatter");
  });
}

// ---- index_select: self [O, D, I] by K indices along dim ----
std::unique_ptr<Kernel> make_index_select(const Build& b) {
  const NodeCtx& node = b.node();
  const Shape& s = node.input(0).shape;
  if (node.input(1).dtype != DType::I64) node.fail("CUDA: index must be int64");
  RowsParams plan;
  plan.elem = elem_size(node, node.input(0).dtype);
  plan.K = node.input(1).numel();
  if (!s.empty()) {
    const int64_t dim = wrap_dim(node, node.attr_int("dim"), static_cast<int64_t>(s.size()));
    plan.O = shape_numel(Shape(s.begin(), s.begin() + dim));
    plan.D = s[dim];
    plan.I = shape_numel(Shape(s.begin() + dim + 1, s.end()));
  }
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    RowsParams p = plan;
    p.self = in[0].data;
    p.index = static_cast<const int64_t*>(in[1].data);
    p.out = out[0].data;
    launch_index_select(p, ctx.stream);
    check_launch(opname::index_select);
  });
}

// ---- index_put: self[index] = / += values, one index tensor on dim 0 ----
std::unique_ptr<Kernel> make_index_put(const Build& b) {
  const NodeCtx& node = b.node();
  if (node.num_inputs() != 3 || !node.has_input(1))
    node.fail("CUDA: index_put with other than one index tensor not supported");
  if (node.input(1).dtype != DType::I64) node.fail("CUDA: index must be int64");
  const Shape& s = node.input(0).shape;
  if (s.empty()) node.fail("CUDA: index_put into a 0-d tensor");
  const DType dt = node.input(0).dtype;
  if (node.input(2).dtype != dt) node.fail("CUDA: index_put values of another dtype");
  RowsParams plan;
  plan.elem = elem_size(node, dt);
  plan.K = node.input(1).numel();
  plan.D = s[0];
  plan.I = shape_numel(Shape(s.begin() + 1, s.end()));
  if (node.input(2).numel() != plan.K * plan.I) node.fail("CUDA: index_put values of the wrong size");
  if (node.attr_bool("accumulate")) plan.op = add_op(node, dt);
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    if (!out[0].data) return;
    copy_self(in[0], out[0], ctx.stream);
    RowsParams p = plan;
    p.index = static_cast<const int64_t*>(in[1].data);
    p.values = in[2].data;
    p.out = out[0].data;
    launch_index_put(p, ctx.stream);
    check_launch(opname::index_put);
  });
}

}  // namespace

void register_index(KernelTable& t) {
  t.add(opname::gather, &make_gather);
  t.add(opname::scatter_value, &make_scatter<Sc::Value>);
  t.add(opname::scatter_src, &make_scatter<Sc::Src>);
  t.add(opname::scatter_add, &make_scatter<Sc::Add>);
  t.add(opname::index_select, &make_index_select);
  t.add(opname::index_put, &make_index_put);
}

}  // namespace ts::cuda

// CUDA kernels of the copying shape ops (the aliasing reshapes run nothing).
// Every op becomes one or more strided copies planned here, at compile time:
// an output region (or a whole output) read from a strided view of an
// input. The views, slice and select arguments are the CPU ops' own
// (OpDef::strided_view, ops/shape.h); elements move as raw bytes, so
// every dtype works. cat/stack with mixed input dtypes (promotion) are
// refused.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cuda/gather.h"
#include "cuda/kernel.h"
#include "ops/broadcast.h"
#include "ops/shape.h"

namespace ts::cuda {

namespace {

using Strides = std::vector<int64_t>;

int elem_size(const NodeCtx& node, DType t) {
  const size_t es = dtype_size(t);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    node.fail("CUDA: element size " + std::to_string(es) + " not supported");
  return static_cast<int>(es);
}

// A copy over the index space `size`: dst element doff + sum i*dst[d] gets
// src element soff + sum i*src[d]. Size-1 dims are dropped and adjacent dims
// that stay contiguous on both sides merged (fewer divisions per element;
// a plain memcpy when everything merges).
CopyParams plan_copy(const NodeCtx& node, const Shape& size, const Strides& src, int64_t soff,
                     const Strides& dst, int64_t doff, int elem) {
  CopyParams p;
  p.elem = elem;
  p.src.offset = soff;
  p.dst.offset = doff;
  p.n = shape_numel(size);
  if (p.n == 0) return p;
  Strides sz, ss, ds;
  for (size_t j = 0; j < size.size(); ++j) {
    if (size[j] == 1) continue;
    if (!sz.empty() && ss.back() == src[j] * size[j] && ds.back() == dst[j] * size[j]) {
      sz.back() *= size[j];
      ss.back() = src[j];
      ds.back() = dst[j];
    } else {
      sz.push_back(size[j]);
      ss.push_back(src[j]);
      ds.push_back(dst[j]);
    }
  }
  if (sz.size() > static_cast<size_t>(kMaxRank))
    node.fail("CUDA: a copy over " + std::to_string(sz.size()) + " dims (after merging) not supported");
  p.rank = static_cast<int>(sz.size());
  for (int d = 0; d < p.rank; ++d) {
    p.size[d] = sz[d];
    p.src.stride[d] = ss[d];
    p.dst.stride[d] = ds[d];
  }
  return p;
}

// A whole contiguous copy of `shape`.
CopyParams plan_plain(const NodeCtx& node, const Shape& shape, int elem) {
  auto cs = contiguous_strides(shape);
  return plan_copy(node, shape, cs, 0, cs, 0, elem);
}

struct Piece {
  int in = 0, out = 0;
  CopyParams p;
};

// Runs its pieces in order on the stream (slice_scatter's second piece
// overwrites part of the first).
class CopyKernel : public Kernel {
 public:
  explicit CopyKernel(std::string op) : op_(std::move(op)) {}
  void add(int in, int out, const CopyParams& p) { pieces_.push_back({in, out, p}); }
  void run(const Tensor* in, Tensor* out, const Ctx& ctx) override {
    for (const Piece& pc : pieces_) {
      if (!out[pc.out].data || pc.p.n == 0) continue;
      CopyParams p = pc.p;
      p.in = in[pc.in].data;
      p.out = out[pc.out].data;
      launch_strided_copy(p, ctx.stream);
      check_launch(op_.c_str());
    }
  }

 private:
  std::string op_;
  std::vector<Piece> pieces_;
};

std::unique_ptr<CopyKernel> new_kernel(const Build& b) {
  return std::make_unique<CopyKernel>(b.node().op());
}

// One input read through strides into the whole contiguous output 0.
std::unique_ptr<Kernel> gather_view(const Build& b, const Strides& src, int64_t soff) {
  const NodeCtx& node = b.node();
  const Shape& out = b.outputs()[0].shape;
  auto k = new_kernel(b);
  k->add(0, 0, plan_copy(node, out, src, soff, contiguous_strides(out), 0,
                         elem_size(node, node.input(0).dtype)));
  return k;
}

// ---- clone, t, transpose, permute, expand, as_strided: output 0 as the
// op's own strided view (OpDef::strided_view) of the contiguous input ----
std::unique_ptr<Kernel> make_view(const Build& b) {
  const NodeCtx& node = b.node();
  const TensorType& x = node.input(0);
  const Shape& out = b.outputs()[0].shape;
  const std::optional<StridedView> v = b.op().strided_view(node, contiguous_view(x.shape), out);
  if (!v || v->size != out || v->offset < 0) node.fail("CUDA: the op gives no strided view of its input");
  // Verify already bounds the reads; checked again since a bad plan here
  // reads outside the input on the device. (Sizes are small enough for
  // these products not to overflow once infer has accepted them.)
  int64_t last = v->offset;
  bool empty = false;
  for (size_t j = 0; j < out.size(); ++j) {
    if (v->stride[j] < 0) node.fail("CUDA: a view with a negative stride");
    if (out[j] == 0) empty = true;
    else last += (out[j] - 1) * v->stride[j];
  }
  if (!empty && last >= x.numel()) node.fail("CUDA: the view reads outside its input");
  return gather_view(b, v->stride, v->offset);
}

// ---- cat / stack: one piece per input, into its slab of the output ----
bool legacy_empty(const TensorType& t) { return t.shape.size() == 1 && t.shape[0] == 0; }

void expect_out_dtype(const Build& b, int i) {
  if (b.node().input(i).dtype != b.outputs()[0].dtype)
    b.node().fail("CUDA: " + b.node().op() + " with mixed input dtypes (promotion) not supported");
}

std::unique_ptr<Kernel> make_cat(const Build& b) {
  const NodeCtx& node = b.node();
  const Shape& out = b.outputs()[0].shape;
  auto k = new_kernel(b);
  if (out.size() == 1 && out[0] == 0) return k;  // every input a legacy [0]: nothing to copy
  const int64_t dim = wrap_dim(node, node.has_attr("dim") ? node.attr_int("dim") : 0,
                               static_cast<int64_t>(out.size()));
  const int elem = elem_size(node, b.outputs()[0].dtype);
  auto ocs = contiguous_strides(out);
  int64_t at = 0;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const TensorType& t = node.input(i);
    if (legacy_empty(t)) continue;
    expect_out_dtype(b, i);
    k->add(i, 0, plan_copy(node, t.shape, contiguous_strides(t.shape), 0, ocs, at * ocs[dim], elem));
    at += t.shape[dim];
  }
  if (at != out[dim]) node.fail("CUDA: cat inputs do not fill the output");
  return k;
}

std::unique_ptr<Kernel> make_stack(const Build& b) {
  const NodeCtx& node = b.node();
  const Shape& out = b.outputs()[0].shape;
  const int64_t dim = wrap_dim(node, node.attr_int("dim"), static_cast<int64_t>(out.size()));
  const int elem = elem_size(node, b.outputs()[0].dtype);
  auto ocs = contiguous_strides(out);
  Strides dst = ocs;
  dst.erase(dst.begin() + dim);
  auto k = new_kernel(b);
  for (int i = 0; i < node.num_inputs(); ++i) {
    expect_out_dtype(b, i);
    const Shape& s = node.input(i).shape;
    k->add(i, 0, plan_copy(node, s, contiguous_strides(s), 0, dst, i * ocs[dim], elem));
  }
  return k;
}

// ---- slice / select / slice_scatter (ops/shape.h's arguments) ----
// The input's strides with dim's scaled by step (0 when the slice has at
// most one element: the stride is never used and step may be huge).
Strides sliced_strides(const Shape& s, const SliceArgs& a) {
  Strides st = contiguous_strides(s);
  st[a.dim] = a.len > 1 ? st[a.dim] * a.step : 0;
  return st;
}

std::unique_ptr<Kernel> make_slice(const Build& b) {
  const NodeCtx& node = b.node();
  SliceArgs a = slice_args(node);
  const Shape& s = node.input(0).shape;
  return gather_view(b, sliced_strides(s, a), a.start * contiguous_strides(s)[a.dim]);
}

std::unique_ptr<Kernel> make_select(const Build& b) {
  const NodeCtx& node = b.node();
  const Shape& s = node.input(0).shape;
  const auto [dim, i] = select_args(node);
  Strides src = contiguous_strides(s);
  const int64_t off = i * src[dim];
  src.erase(src.begin() + dim);
  return gather_view(b, src, off);
}

std::unique_ptr<Kernel> make_slice_scatter(const Build& b) {
  const NodeCtx& node = b.node();
  SliceArgs a = slice_args(node);
  const Shape& s = node.input(0).shape;
  const TensorType& src = node.input(1);
  if (src.dtype != node.input(0).dtype) node.fail("CUDA: slice_scatter src of another dtype");
  const int elem = elem_size(node, node.input(0).dtype);
  auto k = new_kernel(b);
  k->add(0, 0, plan_plain(node, s, elem));
  k->add(1, 0, plan_copy(node, src.shape, contiguous_strides(src.shape), 0, sliced_strides(s, a),
                         a.start * contiguous_strides(s)[a.dim], elem));
  return k;
}

// ---- unbind / unsafe_split / split_with_sizes: output j is a slab of
// input 0 along dim (its length read from the output's own shape) ----
template <bool Unbind>
std::unique_ptr<Kernel> make_split(const Build& b) {
  const NodeCtx& node = b.node();
  const Shape& s = node.input(0).shape;
  if (s.empty()) node.fail("CUDA: split of a 0-d tensor");
  const int64_t dim = wrap_dim(node, node.attr_int("dim"), static_cast<int64_t>(s.size()));
  const int elem = elem_size(node, node.input(0).dtype);
  auto cs = contiguous_strides(s);
  auto k = new_kernel(b);
  int64_t at = 0;
  for (size_t j = 0; j < b.outputs().size(); ++j) {
    const int64_t len = Unbind ? 1 : b.outputs()[j].shape[dim];
    Shape piece = s;
    piece[dim] = len;
    if (at + len > s[dim]) node.fail("CUDA: split pieces exceed the input");
    k->add(0, static_cast<int>(j), plan_copy(node, piece, cs, at * cs[dim], contiguous_strides(piece), 0, elem));
    at += len;
  }
  return k;
}

}  // namespace

void register_shape(KernelTable& t) {
  // Every op that copies a strided view of its input (the aliasing ones run
  // nothing).
  for (const OpDef& d : OpRegistry::get().all())
    if (d.strided_view && !d.alias_input0) t.add(d, &make_view);
  t.add(opname::cat, &make_cat);
  t.add(opname::stack, &make_stack);
  t.add(opname::slice, &make_slice);
  t.add(opname::select, &make_select);
  t.add(opname::slice_scatter, &make_slice_scatter);
  t.add(opname::unbind, &make_split<true>);
  t.add(opname::unsafe_split, &make_split<false>);
  t.add(opname::split_with_sizes, &make_split<false>);
}

}  // namespace ts::cuda

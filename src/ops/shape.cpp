// Shape ops. view/_unsafe_view/reshape/unsqueeze/squeeze only reinterpret a
// contiguous buffer: they set alias_input0 and their make() returns nullptr
// (the executor binds input 0's memory and runs nothing). t, transpose,
// permute, expand, as_strided, cat, stack, slice, select, unbind and
// unsafe_split copy; they work on element bytes, so one instantiation per
// element size covers every dtype.
#include <algorithm>

#include "ops/shape.h"

#include "ops/broadcast.h"
#include "ops/layout.h"

namespace ts {

namespace {

// ---- aliasing reshapes ----
Shape infer_size(const NodeCtx& ctx, const TensorType& t, std::vector<int64_t> size) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer >= 0) ctx.fail("only one dimension of size may be -1");
      infer = static_cast<int64_t>(i);
    } else if (size[i] < 0 || __builtin_mul_overflow(known, size[i], &known)) {
      ctx.fail("invalid size " + shape_str(size));
    }
  }
  const int64_t n = t.numel();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      ctx.fail("shape " + shape_str(size) + " is invalid for input of size " + std::to_string(n));
    size[infer] = n / known;
  } else if (known != n) {
    ctx.fail("shape " + shape_str(size) + " is invalid for input of size " + std::to_string(n));
  }
  return size;
}

std::vector<TensorType> view_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const char* key = ctx.has_attr("size") ? "size" : "shape";
  return {{ctx.input(0).dtype, infer_size(ctx, ctx.input(0), ctx.attr_ints(key))}};
}

std::vector<TensorType> unsqueeze_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  Shape s = ctx.input(0).shape;
  int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), rank_of(ctx.input(0)) + 1);
  s.insert(s.begin() + d, 1);
  return {{ctx.input(0).dtype, s}};
}

std::vector<TensorType> squeeze_dim_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  Shape s = ctx.input(0).shape;
  int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), rank_of(ctx.input(0)));
  if (!s.empty() && s[d] == 1) s.erase(s.begin() + d);
  return {{ctx.input(0).dtype, s}};
}

// torch 2.x's squeeze(self, int[] dim): each listed dim goes if its size is 1.
std::vector<TensorType> squeeze_dims_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const Shape& in = ctx.input(0).shape;
  const int64_t r = rank_of(ctx.input(0));
  std::vector<bool> drop(in.size(), false), seen(in.size(), false);
  for (int64_t d : ctx.attr_ints("dim")) {
    if (r == 0) continue;  // a 0-d tensor has no dim to drop (torch accepts 0 and -1)
    d = wrap_dim(ctx, d, r);
    if (seen[d]) ctx.fail("dim " + std::to_string(d) + " appears multiple times in the list of dims");
    seen[d] = true;
    if (in[d] == 1) drop[d] = true;
  }
  Shape s;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) s.push_back(in[i]);
  return {{ctx.input(0).dtype, s}};
}

std::vector<TensorType> squeeze_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  Shape s;
  for (int64_t d : ctx.input(0).shape)
    if (d != 1) s.push_back(d);
  return {{ctx.input(0).dtype, s}};
}

std::unique_ptr<Kernel> alias_make(const KernelCtx&) { return nullptr; }

// in [R, C] -> out [C, R], in 32x32 tiles so both sides stay in cache.
template <class T>
void transpose2d(const T* in, T* out, int64_t R, int64_t C) {
  constexpr int64_t B = 32;
  const int64_t nr = (R + B - 1) / B, nc = (C + B - 1) / B;
  parallel_for(nr * nc, R * C > kParallelMin, [&](int64_t blk) {
    const int64_t r0 = (blk % nr) * B, c0 = (blk / nr) * B;
    const int64_t r1 = std::min(R, r0 + B), c1 = std::min(C, c0 + B);
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = r0; r < r1; ++r) out[c * R + r] = in[r * C + c];
  });
}

// A strided read of the input in output order (permute, expand).
struct CopyKernel : Kernel {
  enum Kind { Memcpy, Transpose, BatchTranspose, Rows } kind = Rows;
  BcastPlan plan;  // one operand: the input's strides in output order
  int64_t N = 1, R = 1, C = 1;
  int64_t offset = 0;  // first input element read (as_strided's storage_offset)
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    by_size(dtype_size(in[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0].data) + offset;
      T* o = static_cast<T*>(out[0].data);
      if (kind == Memcpy) {
        std::memcpy(o, x, sizeof(T) * plan.numel);
      } else if (kind == Transpose) {
        transpose2d(x, o, R, C);
      } else if (kind == BatchTranspose) {
        for (int64_t n = 0; n < N; ++n) transpose2d(x + n * R * C, o + n * R * C, R, C);
      } else {
        bcast_for_rows(plan, [&](int64_t oo, const int64_t* off, int64_t len, const int64_t* st) {
          const T* px = x + off[0];
          T* po = o + oo;
          const int64_t s = st[0];
          if (s == 1) std::memcpy(po, px, sizeof(T) * len);
          else if (s == 0) for (int64_t i = 0; i < len; ++i) po[i] = px[0];
          else for (int64_t i = 0; i < len; ++i) po[i] = px[i * s];
        });
      }
    });
  }
};

// Builds a copy kernel reading input element at sum(idx[j] * st[j]) for each
// output index, merging dims that stay adjacent.
std::unique_ptr<Kernel> strided_copy(const NodeCtx& ctx, const Shape& out, const std::vector<int64_t>& st,
                                     int64_t offset = 0) {
  std::vector<int64_t> sz, ss;
  for (size_t j = 0; j < out.size(); ++j) {
    if (out[j] == 1) continue;
    if (!sz.empty() && ss.back() == st[j] * out[j]) {
      sz.back() *= out[j];
      ss.back() = st[j];
    } else {
      sz.push_back(out[j]);
      ss.push_back(st[j]);
    }
  }
  if (sz.size() > static_cast<size_t>(kMaxDims)) ctx.fail("too many dims");
  auto k = std::make_unique<CopyKernel>();
  k->offset = offset;
  BcastPlan& p = k->plan;
  p.nops = 1;
  p.rank = static_cast<int>(sz.size());
  p.numel = shape_numel(out);
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = sz[d];
    p.strides[0][d] = ss[d];
  }
  if (p.rank <= 1 && (p.rank == 0 || ss[0] == 1)) {
    k->kind = CopyKernel::Memcpy;
  } else if (p.rank == 2 && ss[0] == 1 && ss[1] == sz[0]) {
    k->kind = CopyKernel::Transpose;  // out [A, B] of in [B, A]
    k->R = sz[1], k->C = sz[0];
  } else if (p.rank == 3 && ss[1] == 1 && ss[2] == sz[1] && ss[0] == sz[1] * sz[2]) {
    k->kind = CopyKernel::BatchTranspose;
    k->N = sz[0], k->R = sz[2], k->C = sz[1];
  }
  return k;
}

std::vector<int64_t> perm_dims(const NodeCtx& ctx) {
  const TensorType& t = ctx.input(0);
  const int64_t r = rank_of(t);
  if (ctx.op() == opname::t) {
    if (r > 2) ctx.fail("t() expects a tensor of rank <= 2, got " + t.str());
    return r == 2 ? std::vector<int64_t>{1, 0} : (r == 1 ? std::vector<int64_t>{0} : std::vector<int64_t>{});
  }
  std::vector<int64_t> p(r);
  for (int64_t i = 0; i < r; ++i) p[i] = i;
  if (ctx.op() == "aten.transpose.int") {
    if (r == 0) {
      wrap_dim(ctx, ctx.attr_int("dim0"), 0);
      wrap_dim(ctx, ctx.attr_int("dim1"), 0);
      return p;
    }
    std::swap(p[wrap_dim(ctx, ctx.attr_int("dim0"), r)], p[wrap_dim(ctx, ctx.attr_int("dim1"), r)]);
    return p;
  }
  auto dims = ctx.attr_ints("dims");
  if (static_cast<int64_t>(dims.size()) != r)
    ctx.fail("permute dims " + shape_str(dims) + " do not match rank " + std::to_string(r));
  std::vector<bool> seen(r, false);
  for (int64_t i = 0; i < r; ++i) {
    p[i] = wrap_dim(ctx, dims[i], r);
    if (seen[p[i]]) ctx.fail("permute dims " + shape_str(dims) + " repeat a dim");
    seen[p[i]] = true;
  }
  return p;
}

std::vector<TensorType> permute_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  auto p = perm_dims(ctx);
  Shape s;
  for (int64_t d : p) s.push_back(ctx.input(0).shape[d]);
  return {{ctx.input(0).dtype, s}};
}

std::unique_ptr<Kernel> permute_make(const KernelCtx& kc) {
  auto p = perm_dims(kc.node);
  auto cs = contiguous_strides(kc.node.input(0).shape);
  std::vector<int64_t> st;
  for (int64_t d : p) st.push_back(cs[d]);
  return strided_copy(kc.node, kc.outputs[0].shape, st);
}

// ---- expand ----
std::vector<TensorType> expand_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const Shape& in = ctx.input(0).shape;
  auto size = ctx.attr_ints("size");
  if (size.size() < in.size())
    ctx.fail("expand size " + shape_str(size) + " has fewer dims than " + ctx.input(0).str());
  const size_t lead = size.size() - in.size();
  Shape out(size.size());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) ctx.fail("expand size " + shape_str(size) + ": -1 is not allowed for a new dim");
      out[i] = size[i];
      continue;
    }
    const int64_t d = in[i - lead];
    if (size[i] == -1 || size[i] == d) out[i] = d;
    else if (d == 1 && size[i] >= 0) out[i] = size[i];
    else ctx.fail("cannot expand " + ctx.input(0).str() + " to size " + shape_str(size));
  }
  TensorType t{ctx.input(0).dtype, out};
  check_layout_ports(ctx, {}, {0});
  port_layout(ctx, true, 0, t);
  return {t};
}

// A channel-blocked output (plan_layouts): a spatial mean's gradient, [N, C,
// 1, 1] to [N, C, H, W], read by blocked pointwise work. Element (n, c, h,
// w) sits at ((n * C/B + c/B) * H * W + h * W + w) * B + c % B.
struct ExpandBlockedKernel : Kernel {
  int64_t N = 0, C = 0, H = 0, W = 0, B = 8;
  int64_t st[4] = {};  // the input's stride for each output dim (0: broadcast)
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    const int64_t CB = C / B, h_ = H, w_ = W, b = B;
    const int64_t s0 = st[0], s1 = st[1], s2 = st[2], s3 = st[3];
    parallel_for(N * CB, N * C * H * W > kParallelMin, [&](int64_t p) {
      const int64_t n = p / CB, c0 = (p % CB) * b;
      float* yp = y + p * h_ * w_ * b;
      for (int64_t h = 0; h < h_; ++h)
        for (int64_t w = 0; w < w_; ++w, yp += b) {
          const float* xi = x + n * s0 + h * s2 + w * s3;
          for (int64_t l = 0; l < b; ++l) yp[l] = xi[(c0 + l) * s1];
        }
    });
  }
};

std::unique_ptr<Kernel> expand_make(const KernelCtx& kc) {
  const Shape& in = kc.node.input(0).shape;
  const Shape& out = kc.outputs[0].shape;
  auto cs = contiguous_strides(in);
  std::vector<int64_t> st(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : cs[i];
  const int64_t block = layout_block(port_layout(kc.node, true, 0, kc.outputs[0]));
  if (block == 1) return strided_copy(kc.node, out, st);
  auto k = std::make_unique<ExpandBlockedKernel>();
  k->N = out[0], k->C = out[1], k->H = out[2], k->W = out[3], k->B = block;
  std::copy(st.begin(), st.end(), k->st);
  return k;
}

// ---- as_strided: out[idx] = flat(self)[storage_offset + sum idx[j] * stride[j]] ----
// functionalize emits it for views it cannot name (split/chunk of a
// contiguous tensor). Every tensor here is contiguous with offset 0, so the
// storage is self's own buffer; reads outside it are rejected at verify.
struct StridedArgs {
  Shape size;
  std::vector<int64_t> stride;
  int64_t offset;
};

StridedArgs strided_args(const NodeCtx& ctx) {
  StridedArgs a{ctx.attr_ints("size"), ctx.attr_ints("stride"),
                ctx.has_attr("storage_offset") ? ctx.attr_int("storage_offset") : 0};
  if (a.size.size() != a.stride.size())
    ctx.fail("size " + shape_str(a.size) + " and stride " + shape_str(a.stride) + " differ in rank");
  if (a.offset < 0) ctx.fail("negative storage_offset " + std::to_string(a.offset));
  int64_t last = a.offset;
  for (size_t j = 0; j < a.size.size(); ++j) {
    if (a.size[j] < 0 || a.stride[j] < 0)
      ctx.fail("negative size or stride in size " + shape_str(a.size) + ", stride " + shape_str(a.stride));
    if (a.size[j] == 0) last = -1;
    int64_t span = 0;
    // Checked: a wrapped product or sum could pass the bound below and the
    // kernel would read far outside its input.
    if (last >= 0 && (__builtin_mul_overflow(a.size[j] - 1, a.stride[j], &span) ||
                      __builtin_add_overflow(last, span, &last)))
      last = std::numeric_limits<int64_t>::max();
  }
  if (last >= ctx.input(0).numel())
    ctx.fail("size " + shape_str(a.size) + ", stride " + shape_str(a.stride) + ", offset " +
             std::to_string(a.offset) + " reads element " + std::to_string(last) + " of " +
             ctx.input(0).str());
  return a;
}

std::vector<TensorType> as_strided_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  return {{ctx.input(0).dtype, strided_args(ctx).size}};
}

std::unique_ptr<Kernel> as_strided_make(const KernelCtx& kc) {
  StridedArgs a = strided_args(kc.node);
  return strided_copy(kc.node, a.size, a.stride, a.offset);
}

// ---- cat ----
// PyTorch still skips legacy empty 1-d tensors ([0]) in cat.
bool skipped(const TensorType& t) { return t.shape.size() == 1 && t.shape[0] == 0; }

std::vector<TensorType> cat_infer(const NodeCtx& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("cat needs at least one tensor");
  const TensorType* ref = nullptr;
  std::vector<TensorType> all;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    TensorType t = ctx.input(i);
    t.wrapped = false;
    all.push_back(t);
    if (!ref && !skipped(t)) ref = &ctx.input(i);
  }
  DType dt = result_type(all);
  if (!ref) return {{dt, {0}}};
  if (ref->shape.empty()) ctx.fail("zero-dimensional tensors cannot be concatenated");
  const int64_t r = rank_of(*ref);
  int64_t dim = wrap_dim(ctx, ctx.has_attr("dim") ? ctx.attr_int("dim") : 0, r);
  Shape out = ref->shape;
  out[dim] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (skipped(t)) continue;
    bool ok = rank_of(t) == r;
    for (int64_t d = 0; ok && d < r; ++d) ok = d == dim || t.shape[d] == ref->shape[d];
    if (!ok) ctx.fail("cat inputs " + ref->str() + " and " + t.str() + " differ outside dim " + std::to_string(dim));
    out[dim] += t.shape[dim];
  }
  return {{dt, out}};
}

struct CatKernel : Kernel {
  int64_t O = 1, I = 1;
  std::vector<int64_t> K;  // size along dim of each input (0 for skipped)
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const size_t es = dtype_size(out[0].dtype);
    int64_t total = 0;
    for (int64_t k : K) total += k;
    char* o = static_cast<char*>(out[0].data);
    const int n = static_cast<int>(K.size());
    parallel_for(O, O * total * I > kParallelMin && O > 1, [&](int64_t ob) {
      int64_t at = 0;
      for (int j = 0; j < n; ++j) {
        if (!K[j]) continue;
        const int64_t len = K[j] * I;
        const char* src = static_cast<const char*>(in[j].data) + ob * len * dtype_size(in[j].dtype);
        cast_buffer(src, in[j].dtype, o + (ob * total * I + at) * es, out[0].dtype, len);
        at += len;
      }
    });
  }
};

std::unique_ptr<Kernel> cat_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  auto k = std::make_unique<CatKernel>();
  const Shape& out = kc.outputs[0].shape;
  int64_t dim = 0;
  if (out.size() > 1 || !(out.size() == 1 && out[0] == 0))
    dim = wrap_dim(ctx, ctx.has_attr("dim") ? ctx.attr_int("dim") : 0, static_cast<int64_t>(out.size()));
  k->O = shape_numel(Shape(out.begin(), out.begin() + dim));
  k->I = shape_numel(Shape(out.begin() + dim + 1, out.end()));
  for (int i = 0; i < ctx.num_inputs(); ++i)
    k->K.push_back(skipped(ctx.input(i)) ? 0 : ctx.input(i).shape[dim]);
  return k;
}

// ---- slice / select: out [O, L, I] read from in [O, D, I] ----
struct SliceKernel : Kernel {
  int64_t O, D, I, start, step, L;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    by_size(dtype_size(in[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0].data);
      T* o = static_cast<T*>(out[0].data);
      const int64_t O_ = O, D_ = D, I_ = I, s0 = start, st = step, L_ = L;
      parallel_for(O_ * L_, O_ * L_ * I_ > kParallelMin, [&](int64_t ol) {
        const int64_t ob = ol / L_, l = ol % L_;
        std::memcpy(o + ol * I_, x + (ob * D_ + s0 + l * st) * I_, sizeof(T) * I_);
      });
    });
  }
};

}  // namespace

SliceArgs slice_args(const NodeCtx& ctx) {
  const TensorType& t = ctx.input(0);
  if (t.shape.empty()) ctx.fail("slice of a 0-d tensor");
  SliceArgs a;
  a.dim = wrap_dim(ctx, ctx.has_attr("dim") ? ctx.attr_int("dim") : 0, rank_of(t));
  const int64_t n = t.shape[a.dim];
  a.step = ctx.has_attr("step") ? ctx.attr_int("step") : 1;
  if (a.step <= 0) ctx.fail("slice step must be positive, got " + std::to_string(a.step));
  auto clampi = [n](int64_t v) {
    if (v < 0) v += n;
    return std::min(std::max<int64_t>(v, 0), n);
  };
  a.start = ctx.has_attr("start") ? clampi(ctx.attr_int("start")) : 0;
  const int64_t end = ctx.has_attr("end") ? clampi(ctx.attr_int("end")) : n;
  a.len = end > a.start ? 1 + (end - a.start - 1) / a.step : 0;  // no overflow for a huge step
  return a;
}

namespace {

std::vector<TensorType> slice_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  auto a = slice_args(ctx);
  Shape s = ctx.input(0).shape;
  s[a.dim] = a.len;
  return {{ctx.input(0).dtype, s}};
}

std::unique_ptr<Kernel> slice_kernel(const Shape& s, int64_t dim, int64_t start, int64_t step, int64_t len) {
  auto k = std::make_unique<SliceKernel>();
  k->O = shape_numel(Shape(s.begin(), s.begin() + dim));
  k->D = s[dim];
  k->I = shape_numel(Shape(s.begin() + dim + 1, s.end()));
  k->start = start, k->step = step, k->L = len;
  return k;
}

std::unique_ptr<Kernel> slice_make(const KernelCtx& kc) {
  auto a = slice_args(kc.node);
  return slice_kernel(kc.node.input(0).shape, a.dim, a.start, a.step, a.len);
}

// ---- slice_scatter: self with self[start:end:step] along dim replaced by
// src (torch 2.x's functionalize writes an in-place update of a slice so) ----
struct SliceScatterKernel : Kernel {
  int64_t O, D, I, start, step, L;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const size_t es = dtype_size(in[0].dtype);
    if (out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, O * D * I * es);
    const char* src = static_cast<const char*>(in[1].data);
    char* o = static_cast<char*>(out[0].data);
    const int64_t O_ = O, D_ = D, I_ = I, s0 = start, st = step, L_ = L;
    parallel_for(O_ * L_, O_ * L_ * I_ > kParallelMin, [&](int64_t ol) {
      const int64_t ob = ol / L_, l = ol % L_;
      std::memcpy(o + ((ob * D_ + s0 + l * st) * I_) * es, src + ol * I_ * es, I_ * es);
    });
  }
};

std::vector<TensorType> slice_scatter_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  auto a = slice_args(ctx);
  TensorType want = ctx.input(0);
  want.shape[a.dim] = a.len;
  const TensorType& src = ctx.input(1);
  if (src.dtype != want.dtype || src.shape != want.shape)
    ctx.fail("src is " + src.str() + ", the slice is " + want.str());
  return {ctx.input(0)};
}

std::unique_ptr<Kernel> slice_scatter_make(const KernelCtx& kc) {
  auto a = slice_args(kc.node);
  const Shape& s = kc.node.input(0).shape;
  auto k = std::make_unique<SliceScatterKernel>();
  k->O = shape_numel(Shape(s.begin(), s.begin() + a.dim));
  k->D = s[a.dim];
  k->I = shape_numel(Shape(s.begin() + a.dim + 1, s.end()));
  k->start = a.start, k->step = a.step, k->L = a.len;
  return k;
}

}  // namespace

std::pair<int64_t, int64_t> select_args(const NodeCtx& ctx) {
  const TensorType& t = ctx.input(0);
  if (t.shape.empty()) ctx.fail("select of a 0-d tensor");
  int64_t dim = wrap_dim(ctx, ctx.attr_int("dim"), rank_of(t));
  int64_t i = ctx.attr_int("index"), n = t.shape[dim];
  if (i < -n || i >= n)
    ctx.fail("index " + std::to_string(i) + " is out of range for dim " + std::to_string(dim) +
             " of size " + std::to_string(n));
  return {dim, i < 0 ? i + n : i};
}

namespace {

std::vector<TensorType> select_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  Shape s = ctx.input(0).shape;
  s.erase(s.begin() + select_args(ctx).first);
  return {{ctx.input(0).dtype, s}};
}

std::unique_ptr<Kernel> select_make(const KernelCtx& kc) {
  auto [dim, i] = select_args(kc.node);
  return slice_kernel(kc.node.input(0).shape, dim, i, 1, 1);
}

// ---- stack: cat of unsqueeze(dim) ----
std::vector<TensorType> stack_infer(const NodeCtx& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("stack needs at least one tensor");
  const TensorType& ref = ctx.input(0);
  std::vector<TensorType> all;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).shape != ref.shape)
      ctx.fail("stack inputs " + ref.str() + " and " + ctx.input(i).str() + " differ in shape");
    all.push_back(ctx.input(i));
    all.back().wrapped = false;
  }
  Shape out = ref.shape;
  out.insert(out.begin() + wrap_dim(ctx, ctx.attr_int("dim"), rank_of(ref) + 1), ctx.num_inputs());
  return {{result_type(all), out}};
}

std::unique_ptr<Kernel> stack_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const Shape& out = kc.outputs[0].shape;
  const int64_t dim = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(out.size()));
  auto k = std::make_unique<CatKernel>();
  k->O = shape_numel(Shape(out.begin(), out.begin() + dim));
  k->I = shape_numel(Shape(out.begin() + dim + 1, out.end()));
  k->K.assign(ctx.num_inputs(), 1);
  return k;
}

// ---- unbind / unsafe_split: several slices of self along dim ----
// out[j] is self[starts[j] : starts[j] + lens[j]] along dim (unbind: length
// 1 and the dim dropped).
struct SplitKernel : Kernel {
  int64_t O, D, I;
  std::vector<int64_t> starts, lens;
  void run(const Tensor* in, Tensor* out) override {
    const size_t es = dtype_size(in[0].dtype);
    const char* x = static_cast<const char*>(in[0].data);
    for (size_t j = 0; j < starts.size(); ++j) {
      if (!out[j].data) continue;
      char* o = static_cast<char*>(out[j].data);
      const size_t row = static_cast<size_t>(lens[j] * I) * es;
      const int64_t s0 = starts[j];
      parallel_for(O, O * lens[j] * I > kParallelMin && O > 1, [&](int64_t ob) {
        std::memcpy(o + ob * row, x + (ob * D + s0) * I * es, row);
      });
    }
  }
};

// How a split op cuts: unbind (pieces of 1, the dim dropped), unsafe_split
// (chunks of split_size, the last one shorter), split_with_sizes (torch
// 2.x's split: the lengths split_sizes, which must add up to the dim).
enum class Cut { Unbind, BySize, BySizes };

std::pair<int64_t, std::vector<int64_t>> split_pieces(const NodeCtx& ctx, Cut cut) {
  const TensorType& t = ctx.input(0);
  if (t.shape.empty()) ctx.fail("cannot split a 0-d tensor");
  int64_t dim = wrap_dim(ctx, ctx.attr_int("dim"), rank_of(t));
  const int64_t n = t.shape[dim];
  std::vector<int64_t> lens;
  if (cut == Cut::Unbind) {
    lens.assign(n, 1);
  } else if (cut == Cut::BySizes) {
    lens = ctx.attr_ints("split_sizes");
    int64_t total = 0;
    for (int64_t len : lens)
      if (len < 0 || __builtin_add_overflow(total, len, &total))
        ctx.fail("split_sizes " + shape_str(lens) + " holds a negative size");
    if (total != n)
      ctx.fail("split_sizes " + shape_str(lens) + " add up to " + std::to_string(total) +
               ", not dim " + std::to_string(dim) + "'s size " + std::to_string(n));
  } else {
    const int64_t sz = ctx.attr_int("split_size");
    if (sz < 0 || (sz == 0 && n != 0)) ctx.fail("split_size must be positive, got " + std::to_string(sz));
    for (int64_t at = 0; at < n || (n == 0 && lens.empty()); at += sz) lens.push_back(std::min(sz, n - at));
  }
  return {dim, lens};
}

template <Cut C>
std::vector<TensorType> split_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  auto [dim, lens] = split_pieces(ctx, C);
  std::vector<TensorType> out;
  for (int64_t len : lens) {
    Shape s = ctx.input(0).shape;
    if (C == Cut::Unbind) s.erase(s.begin() + dim);
    else s[dim] = len;
    out.push_back({ctx.input(0).dtype, s});
  }
  return out;
}

template <Cut C>
std::unique_ptr<Kernel> split_make(const KernelCtx& kc) {
  auto [dim, lens] = split_pieces(kc.node, C);
  const Shape& s = kc.node.input(0).shape;
  auto k = std::make_unique<SplitKernel>();
  k->O = shape_numel(Shape(s.begin(), s.begin() + dim));
  k->D = s[dim];
  k->I = shape_numel(Shape(s.begin() + dim + 1, s.end()));
  int64_t at = 0;
  for (int64_t len : lens) {
    k->starts.push_back(at);
    k->lens.push_back(len);
    at += len;
  }
  return k;
}

// ---- strided views (OpDef::strided_view, the compose_views pass) ----

// A reshape of a view, as torch's view() strides it: each run of input dims
// that is contiguous in the buffer may be split or merged; nothing else.
std::optional<StridedView> reshape_view(const NodeCtx&, const StridedView& in, const Shape& out) {
  StridedView v{out, std::vector<int64_t>(out.size(), 1), in.offset};
  if (in.size.empty() || shape_numel(in.size) == 0) {
    v.stride = contiguous_view(out).stride;  // at most one element is read
    return v;
  }
  int64_t view_d = static_cast<int64_t>(out.size()) - 1;
  int64_t base = in.stride.back(), in_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(in.size.size()) - 1; d >= 0; --d) {
    in_numel *= in.size[d];
    // The end of a run of dims contiguous with each other.
    if (d == 0 || (in.size[d - 1] != 1 && in.stride[d - 1] != in_numel * base)) {
      while (view_d >= 0 && (view_numel < in_numel || out[view_d] == 1)) {
        v.stride[view_d] = view_numel * base;
        view_numel *= out[view_d];
        --view_d;
      }
      if (view_numel != in_numel) return std::nullopt;
      if (d > 0) {
        base = in.stride[d - 1];
        in_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return v;
}

std::optional<StridedView> permute_view(const NodeCtx& ctx, const StridedView& in, const Shape&) {
  StridedView v{{}, {}, in.offset};
  for (int64_t d : perm_dims(ctx)) {
    v.size.push_back(in.size[d]);
    v.stride.push_back(in.stride[d]);
  }
  return v;
}

std::optional<StridedView> expand_view(const NodeCtx&, const StridedView& in, const Shape& out) {
  StridedView v{out, std::vector<int64_t>(out.size(), 0), in.offset};
  const size_t lead = out.size() - in.size.size();
  for (size_t i = 0; i < in.size.size(); ++i)
    v.stride[lead + i] = in.size[i] == 1 && out[lead + i] != 1 ? 0 : in.stride[i];
  return v;
}

// as_strided addresses its input's buffer, which is the view's only when
// the view is contiguous.
std::optional<StridedView> as_strided_view(const NodeCtx& ctx, const StridedView& in,
                                           const Shape&) {
  if (!is_contiguous(in)) return std::nullopt;
  StridedArgs a = strided_args(ctx);
  return StridedView{a.size, a.stride, in.offset + a.offset};
}

}  // namespace

void register_shape_ops(OpRegistry& registry) {
  // Shape ops move bytes (by_size, memcpy) or cast (cat and stack promote
  // through cast_buffer): bfloat16 is native to all of them.
  struct Native {
    OpRegistry& reg;
    void add(OpDef d) {
      d.bf16 = Bf16::Native;
      reg.add(std::move(d));
    }
  } r{registry};
  const std::string al = "; aliases input 0 (no kernel: make returns nullptr); any dtype";
  // Every aliasing reshape views its input the way torch's view() does.
  auto alias = [&](OpDef d) {
    d.strided_view = &reshape_view;
    r.add(std::move(d));
  };
  OpDef view{opname::view, "self with shape attr size (one -1 inferred)" + al, &view_infer, &alias_make, true};
  view.algebra.reshape_like = true;
  alias(std::move(view));
  OpDef unsafe_view{"aten._unsafe_view.default", "self with shape attr size (one -1 inferred)" + al, &view_infer, &alias_make, true};
  unsafe_view.algebra.reshape_like = true;
  alias(std::move(unsafe_view));
  OpDef reshape{"aten.reshape.default", "self with shape attr shape (one -1 inferred)" + al, &view_infer, &alias_make, true};
  reshape.algebra.reshape_like = true;
  alias(std::move(reshape));
  alias(OpDef{"aten.unsqueeze.default", "self with a size-1 dim inserted at attr dim" + al, &unsqueeze_infer, &alias_make, true});
  alias(OpDef{"aten.squeeze.dim", "self without dim attr dim if its size is 1" + al, &squeeze_dim_infer, &alias_make, true});
  alias(OpDef{"aten.squeeze.dims", "self without the dims of attr dim whose size is 1" + al, &squeeze_dims_infer, &alias_make, true});
  alias(OpDef{"aten.squeeze.default", "self without its size-1 dims" + al, &squeeze_infer, &alias_make, true});
  OpDef t{opname::t, "transpose of a rank <= 2 tensor (blocked copy); any dtype", &permute_infer, &permute_make, false, nullptr, false, -1, true};
  t.algebra.involution = true;
  t.fuse_role = FuseRole::Transpose;
  t.strided_view = &permute_view;
  r.add(std::move(t));
  OpDef transpose{"aten.transpose.int", "self with dims dim0 and dim1 swapped (copy); any dtype", &permute_infer, &permute_make, false, nullptr, false, -1, true};
  transpose.fuse_role = FuseRole::SwapDims;
  transpose.strided_view = &permute_view;
  r.add(std::move(transpose));
  OpDef permute{"aten.permute.default", "self with dims reordered by attr dims (copy); any dtype", &permute_infer, &permute_make, false, nullptr, false, -1, true};
  permute.fuse_role = FuseRole::Permute;
  permute.strided_view = &permute_view;
  r.add(std::move(permute));
  OpDef expand{"aten.expand.default", "self broadcast to attr size (-1 keeps a dim; copy); any dtype; a float32 rank-4 result may be channel-blocked (plan_layouts)", &expand_infer, &expand_make, false, nullptr, false, -1, true};
  expand.layouts = LayoutCaps{{out_port(0)}, {}, nullptr};
  expand.strided_view = &expand_view;
  r.add(std::move(expand));
  r.add(OpDef{opname::cat, "inputs concatenated along attr dim (legacy [0] inputs skipped); dtypes promoted", &cat_infer, &cat_make, false, nullptr, false, -1, true});
  r.add(OpDef{opname::slice_scatter, "self with self[start:end:step] along attr dim replaced by src (same dtype, the slice's shape); any dtype", &slice_scatter_infer, &slice_scatter_make, false, nullptr, false, -1, true});
  r.add(OpDef{opname::slice, "self[start:end:step] along attr dim (null/huge ends clamp; step > 0); any dtype", &slice_infer, &slice_make, false, nullptr, false, -1, true});
  r.add(OpDef{opname::select, "self[index] along attr dim, dropping the dim; any dtype", &select_infer, &select_make, false, nullptr, false, -1, true});
  OpDef as_strided{opname::as_strided, "out[i] = self's buffer at storage_offset + sum(i_j * stride_j) (copy; reads must stay inside self); any dtype", &as_strided_infer, &as_strided_make, false, nullptr, false, -1, true};
  as_strided.strided_view = &as_strided_view;
  r.add(std::move(as_strided));
  r.add(OpDef{opname::stack, "inputs (one shape) stacked along a new attr dim; dtypes promoted", &stack_infer, &stack_make, false, nullptr, false, -1, true});
  r.add(OpDef{opname::unbind, "the slices self[i] along attr dim, one output each (copies); any dtype", &split_infer<Cut::Unbind>, &split_make<Cut::Unbind>, false, nullptr, false, -1, true});
  r.add(OpDef{opname::unsafe_split, "self cut along attr dim into pieces of split_size (the last shorter), one output each (copies); any dtype", &split_infer<Cut::BySize>, &split_make<Cut::BySize>, false, nullptr, false, -1, true});
  r.add(OpDef{opname::split_with_sizes, "self cut along attr dim into pieces of the lengths attr split_sizes (adding up to the dim), one output each (copies); any dtype", &split_infer<Cut::BySizes>, &split_make<Cut::BySizes>, false, nullptr, false, -1, true});
}

}  // namespace ts

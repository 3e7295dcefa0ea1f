// gather / scatter / scatter_add / index_select along one dim, and
// index_put with one index tensor (embedding backward).
//
// Indices are validated in a first pass over the index tensor (cheap, no
// allocation); a bad one throws ts::Error naming the node, op and value.
// With index shaped like self outside `dim` (the usual case, e.g. picking the
// target logit) offsets come from an [O, K, I] view; otherwise each element's
// offset is rebuilt from its multi-index.
#include "ops/broadcast.h"
#include "ops/index.h"

namespace ts {

namespace {

[[noreturn]] void bad_index(const std::string& where, int64_t v, int64_t dim, int64_t size) {
  fail(where + ": index " + std::to_string(v) + " is out of bounds for dimension " +
       std::to_string(dim) + " with size " + std::to_string(size));
}

void check_indices(const std::string& where, const int64_t* idx, int64_t n, int64_t dim, int64_t size) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= (idx[i] >= 0) & (idx[i] < size);
  if (ok) return;
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= size) bad_index(where, idx[i], dim, size);
}

std::string where_of(const NodeCtx& ctx) { return "node '" + ctx.node() + "' (" + ctx.op() + ")"; }

// Offsets for gather/scatter: index element e -> offset in self (without the
// dim term) and in src.
struct IndexPlan {
  int rank = 0;
  int64_t dim = 0, n = 0;
  int64_t O = 1, K = 1, I = 1, D = 1;  // [O, K, I] index view; D = self.shape[dim]
  bool simple = false;                  // index matches self and src outside dim
  int64_t ishape[kMaxDims] = {}, sstride[kMaxDims] = {}, rstride[kMaxDims] = {};
  int64_t self_off(int64_t e, int64_t* src_off) const {
    int64_t so = 0, ro = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t id = e % ishape[d];
      e /= ishape[d];
      if (d != dim) so += id * sstride[d];
      ro += id * rstride[d];
    }
    *src_off = ro;
    return so;
  }
};

IndexPlan make_index_plan(const NodeCtx& ctx, const Shape& self, const Shape& index, const Shape* src,
                          int64_t dim) {
  IndexPlan p;
  p.rank = static_cast<int>(index.size());
  if (p.rank > kMaxDims) ctx.fail("too many dims");
  p.dim = dim;
  p.n = shape_numel(index);
  p.D = self.empty() ? 1 : self[dim];
  auto ss = contiguous_strides(self), rs = src ? contiguous_strides(*src) : contiguous_strides(index);
  p.simple = true;
  for (int d = 0; d < p.rank; ++d) {
    p.ishape[d] = index[d];
    p.sstride[d] = self.empty() ? 0 : ss[d];
    p.rstride[d] = rs[d];
    if (d != dim && index[d] != self[d]) p.simple = false;
    if (src && index[d] != (*src)[d]) p.simple = false;
    if (d < dim) p.O *= index[d];
    if (d > dim) p.I *= index[d];
  }
  p.K = p.rank ? index[dim] : 1;
  return p;
}

// Shared validation: index int64 of self's rank, sizes bounded by self (and
// src) outside dim.
int64_t check_gather_like(const NodeCtx& ctx, const TensorType& self, const TensorType& index,
                          const TensorType* src) {
  ctx.expect_dtype(1, DType::I64);
  int64_t dim = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(self.shape.size()));
  if (index.shape.size() != self.shape.size() && !(index.shape.size() <= 1 && self.shape.size() <= 1))
    ctx.fail("index " + index.str() + " must have the same rank as self " + self.str());
  if (self.shape.empty() || index.shape.empty()) {
    if (index.numel() > 1 || self.numel() > 1) ctx.fail("index " + index.str() + " does not match self " + self.str());
    return 0;
  }
  for (size_t d = 0; d < self.shape.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index.shape[d] > self.shape[d])
      ctx.fail("index " + index.str() + " is larger than self " + self.str() + " outside dim " +
               std::to_string(dim));
    if (src && index.shape[d] > src->shape[d])
      ctx.fail("index " + index.str() + " is larger than src " + src->str());
  }
  return dim;
}

// ---- gather ----
std::vector<TensorType> gather_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  check_gather_like(ctx, ctx.input(0), ctx.input(1), nullptr);
  return {{ctx.input(0).dtype, ctx.input(1).shape}};
}

struct GatherKernel : Kernel {
  IndexPlan p;
  std::string where;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t* idx = in[1].as<int64_t>();
    check_indices(where, idx, p.n, p.dim, p.D);
    dispatch_dtype(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* s = in[0].as<T>();
      T* o = out[0].as<T>();
      const IndexPlan& q = p;
      if (q.simple) {
        parallel_for(q.O * q.K, q.n > kParallelMin, [&](int64_t ok) {
          const int64_t ob = ok / q.K;
          const int64_t* ix = idx + ok * q.I;
          const T* sb = s + ob * q.D * q.I;
          T* ob_ = o + ok * q.I;
          for (int64_t i = 0; i < q.I; ++i) ob_[i] = sb[ix[i] * q.I + i];
        });
      } else {
        const int64_t dstride = q.rank ? q.sstride[q.dim] : 0;
        parallel_for(q.n, q.n > kParallelMin, [&](int64_t e) {
          int64_t ro;
          o[e] = s[q.self_off(e, &ro) + idx[e] * dstride];
        });
      }
    });
  }
};

std::unique_ptr<Kernel> gather_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  int64_t dim = check_gather_like(ctx, ctx.input(0), ctx.input(1), nullptr);
  auto k = std::make_unique<GatherKernel>();
  k->p = make_index_plan(ctx, ctx.input(0).shape, ctx.input(1).shape, nullptr, dim);
  k->where = where_of(ctx);
  return k;
}

// ---- scatter (value / src) and scatter_add ----
enum class Sc { Value, Src, Add };

template <Sc OP>
std::vector<TensorType> scatter_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(OP == Sc::Value ? 2 : 3);
  const TensorType* src = nullptr;
  if (OP != Sc::Value) {
    src = &ctx.input(2);
    if (src->dtype != ctx.input(0).dtype)
      ctx.fail("src " + src->str() + " must have self's dtype " + dtype_name(ctx.input(0).dtype));
  } else {
    ctx.attr_float("value");
  }
  check_gather_like(ctx, ctx.input(0), ctx.input(1), src);
  return {{ctx.input(0).dtype, ctx.input(0).shape}};
}

struct ScatterKernel : Kernel {
  Sc op;
  IndexPlan p;
  std::string where;
  double value = 0;
  int64_t value_i = 0;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t* idx = in[1].as<int64_t>();
    check_indices(where, idx, p.n, p.dim, p.D);
    if (out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, in[0].nbytes());
    dispatch_dtype(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = out[0].as<T>();
      T v;
      store_scalar(&v, in[0].dtype, value, value_i);
      const T* src = op == Sc::Value ? nullptr : in[2].as<T>();
      const int64_t dstride = p.rank ? p.sstride[p.dim] : 0;
      // Serial: several index elements may hit one output element.
      for (int64_t e = 0; e < p.n; ++e) {
        int64_t ro;
        const int64_t so = p.self_off(e, &ro) + idx[e] * dstride;
        if (op == Sc::Value) o[so] = v;
        else if (op == Sc::Src) o[so] = src[ro];
        else o[so] = wrap_add(o[so], src[ro]);
      }
    });
  }
};

template <Sc OP>
std::unique_ptr<Kernel> scatter_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const TensorType* src = OP == Sc::Value ? nullptr : &ctx.input(2);
  int64_t dim = check_gather_like(ctx, ctx.input(0), ctx.input(1), src);
  auto k = std::make_unique<ScatterKernel>();
  k->op = OP;
  k->p = make_index_plan(ctx, ctx.input(0).shape, ctx.input(1).shape, src ? &src->shape : nullptr, dim);
  k->where = where_of(ctx);
  if (OP == Sc::Value) {
    k->value = ctx.attr_float("value");
    k->value_i = ctx.attrs().at("value").is_number_integer() ? ctx.attr_int("value")
                                                              : int_of_float(k->value);
  }
  return k;
}

// ---- index_select ----
std::vector<TensorType> index_select_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  ctx.expect_dtype(1, DType::I64);
  const TensorType& s = ctx.input(0);
  if (ctx.input(1).shape.size() > 1) ctx.fail("index must be 0-d or 1-d, got " + ctx.input(1).str());
  int64_t dim = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(s.shape.size()));
  Shape out = s.shape;
  if (out.empty()) {
    if (ctx.input(1).numel() != 1) ctx.fail("index_select on a 0-d tensor needs one index");
  } else {
    out[dim] = ctx.input(1).numel();
  }
  return {{s.dtype, out}};
}

struct IndexSelectKernel : Kernel {
  int64_t O, D, I, K;
  std::string where;
  int64_t dim;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t* idx = in[1].as<int64_t>();
    check_indices(where, idx, K, dim, D);
    const size_t es = dtype_size(in[0].dtype), row = static_cast<size_t>(I) * es;
    const char* s = static_cast<const char*>(in[0].data);
    char* o = static_cast<char*>(out[0].data);
    parallel_for(O * K, O * K * I > kParallelMin, [&](int64_t ok) {
      const int64_t ob = ok / K, k = ok % K;
      std::memcpy(o + ok * row, s + (ob * D + idx[k]) * row, row);
    });
  }
};

std::unique_ptr<Kernel> index_select_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const Shape& s = ctx.input(0).shape;
  auto k = std::make_unique<IndexSelectKernel>();
  k->dim = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(s.size()));
  k->K = ctx.input(1).numel();
  k->O = 1, k->D = 1, k->I = 1;
  if (!s.empty()) {
    k->O = shape_numel(Shape(s.begin(), s.begin() + k->dim));
    k->D = s[k->dim];
    k->I = shape_numel(Shape(s.begin() + k->dim + 1, s.end()));
  }
  k->where = where_of(ctx);
  return k;
}

// ---- index_put with one index tensor: self[index] = / += values ----
// Inputs: self, the index tensor (ATen's `indices` list, one entry), values.
std::vector<TensorType> index_put_infer(const NodeCtx& ctx) {
  if (ctx.num_inputs() != 3 || !ctx.has_input(1))
    ctx.fail("only one index tensor (indexing dim 0) is supported, got " +
             std::to_string(ctx.num_inputs() - 2));
  ctx.expect_dtype(1, DType::I64);
  const TensorType& s = ctx.input(0);
  const TensorType& v = ctx.input(2);
  if (s.shape.empty()) ctx.fail("self must have at least one dim");
  if (v.dtype != s.dtype)
    ctx.fail("values " + v.str() + " must have self's dtype " + dtype_name(s.dtype));
  Shape want = ctx.input(1).shape;
  want.insert(want.end(), s.shape.begin() + 1, s.shape.end());
  if (v.shape != want)
    ctx.fail("values " + v.str() + " must be index shape + self's trailing dims " +
             TensorType{v.dtype, want}.str());
  ctx.attr_bool("accumulate");
  return {{s.dtype, s.shape}};
}

struct IndexPutKernel : Kernel {
  int64_t K = 0, D = 0, I = 0;
  bool accumulate = false;
  std::string where;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t* idx = in[1].as<int64_t>();
    // torch takes negative indices from the end.
    for (int64_t k = 0; k < K; ++k)
      if (idx[k] < -D || idx[k] >= D) bad_index(where, idx[k], 0, D);
    if (out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, in[0].nbytes());
    dispatch_dtype(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = out[0].as<T>();
      const T* v = in[2].as<T>();
      // Serial over k: duplicate indices hit the same row.
      for (int64_t k = 0; k < K; ++k) {
        T* row = o + (idx[k] < 0 ? idx[k] + D : idx[k]) * I;
        const T* src = v + k * I;
        if (accumulate) {
          for (int64_t i = 0; i < I; ++i) row[i] = wrap_add(row[i], src[i]);
        } else {
          std::memcpy(row, src, static_cast<size_t>(I) * sizeof(T));
        }
      }
    });
  }
};

std::unique_ptr<Kernel> index_put_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const Shape& s = ctx.input(0).shape;
  auto k = std::make_unique<IndexPutKernel>();
  k->K = ctx.input(1).numel();
  k->D = s[0];
  k->I = shape_numel(Shape(s.begin() + 1, s.end()));
  k->accumulate = ctx.attr_bool("accumulate");
  k->where = where_of(ctx);
  return k;
}

}  // namespace

void register_index_ops(OpRegistry& r) {
  r.add(OpDef{opname::gather,
              "out[..i..] = self[..index[..i..] at dim..]; index int64, same rank, not larger than self outside dim; any dtype",
              &gather_infer, &gather_make, false});
  r.add(OpDef{opname::scatter_value, "copy of self with self[..index.. at dim] = attr value; index int64; any dtype",
              &scatter_infer<Sc::Value>, &scatter_make<Sc::Value>, false});
  r.add(OpDef{opname::scatter_src, "copy of self with self[..index.. at dim] = src; index int64; src has self's dtype",
              &scatter_infer<Sc::Src>, &scatter_make<Sc::Src>, false});
  r.add(OpDef{opname::scatter_add, "copy of self with src added at self[..index.. at dim]; index int64; src has self's dtype",
              &scatter_infer<Sc::Add>, &scatter_make<Sc::Add>, false});
  r.add(OpDef{opname::index_select, "self's slices along dim picked by a 0-d/1-d int64 index; any dtype",
              &index_select_infer, &index_select_make, false});
  r.add(OpDef{opname::index_put,
              "copy of self with self[index] = values (attr accumulate: +=, duplicates add up); one "
              "int64 index tensor on dim 0 (negative from the end); values shaped index + self's "
              "trailing dims; any dtype",
              &index_put_infer, &index_put_make, false});
}

}  // namespace ts

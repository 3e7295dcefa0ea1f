// repeat (tile self), flip (reverse dims) and cumsum (running sum along a
// dim; cumsum's autograd backward is flip-cumsum-flip). repeat and flip move
// element bytes, so one instantiation per element size covers every dtype.
#include <algorithm>

#include "ops/broadcast.h"

namespace ts {

namespace {

// ---- repeat ----
// self's shape with leading 1s up to the length of repeats, and the result.
std::pair<Shape, Shape> repeat_shapes(const NodeCtx& ctx) {
  const TensorType& t = ctx.input(0);
  const auto reps = ctx.attr_ints("repeats");
  if (reps.size() < t.shape.size())
    ctx.fail("repeats " + shape_str(reps) + " has fewer entries than " + t.str() + " has dims");
  Shape in(reps.size() - t.shape.size(), 1);
  in.insert(in.end(), t.shape.begin(), t.shape.end());
  Shape out(reps.size());
  for (size_t d = 0; d < reps.size(); ++d) {
    if (reps[d] < 0) ctx.fail("repeats " + shape_str(reps) + " holds a negative count");
    if (__builtin_mul_overflow(in[d], reps[d], &out[d])) ctx.fail("repeats " + shape_str(reps) + " overflow");
  }
  return {in, out};
}

std::vector<TensorType> repeat_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  return {{ctx.input(0).dtype, repeat_shapes(ctx).second}};
}

// Each output row (last dim) is one input row, picked by the outer indices
// modulo self's sizes, laid down `times` times.
struct RepeatKernel : Kernel {
  int rank = 0;  // outer dims
  int64_t oshape[kMaxDims] = {}, ishape[kMaxDims] = {}, istride[kMaxDims] = {};
  int64_t IW = 1, times = 1, rows = 0;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data || rows == 0) return;
    by_size(dtype_size(out[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0].data);
      T* o = static_cast<T*>(out[0].data);
      const int64_t W = IW * times;
      parallel_for(rows, rows * W > kParallelMin && rows > 1, [&](int64_t q) {
        T* po = o + q * W;
        int64_t off = 0;
        for (int d = rank - 1; d >= 0; --d) {
          off += (q % oshape[d]) % ishape[d] * istride[d];
          q /= oshape[d];
        }
        const T* src = x + off * IW;
        if (IW == 1) std::fill(po, po + times, src[0]);
        else for (int64_t k = 0; k < times; ++k) std::memcpy(po + k * IW, src, sizeof(T) * IW);
      });
    });
  }
};

std::unique_ptr<Kernel> repeat_make(const KernelCtx& kc) {
  auto [in, out] = repeat_shapes(kc.node);
  auto k = std::make_unique<RepeatKernel>();
  const int r = static_cast<int>(out.size());
  if (r > kMaxDims + 1) kc.node.fail("too many dims");
  if (r == 0 || shape_numel(out) == 0) {  // 0-d: one element; empty: nothing
    k->rows = shape_numel(out);
    return k;
  }
  k->rank = r - 1;
  int64_t st = 1;
  for (int d = r - 2; d >= 0; --d) {  // strides in rows of self
    k->oshape[d] = out[d];
    k->ishape[d] = in[d];
    k->istride[d] = st;
    st *= in[d];
  }
  k->IW = in[r - 1];
  k->times = out[r - 1] / in[r - 1];
  k->rows = shape_numel(out) / out[r - 1];
  return k;
}

// ---- flip ----
std::vector<bool> flip_dims(const NodeCtx& ctx) {
  const int64_t r = rank_of(ctx.input(0));
  std::vector<bool> f(std::max<int64_t>(r, 1), false);  // a 0-d tensor takes dim 0 / -1
  for (int64_t d : ctx.attr_ints("dims")) {
    d = wrap_dim(ctx, d, r);
    if (f[d]) ctx.fail("dim " + std::to_string(d) + " appears multiple times in the list of dims");
    f[d] = true;
  }
  f.resize(r);
  return f;
}

std::vector<TensorType> flip_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  flip_dims(ctx);
  return {ctx.input(0)};
}

// Dims merged where flipping commutes with merging (two adjacent flipped
// dims reverse as one); each output row (last merged dim) is one input row,
// forwards or reversed.
struct FlipKernel : Kernel {
  int rank = 0;  // outer merged dims
  int64_t shape[kMaxDims] = {}, stride[kMaxDims] = {};
  bool flip[kMaxDims] = {};
  int64_t W = 1, rows = 0;
  bool flip_last = false;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data || rows == 0) return;
    by_size(dtype_size(out[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0].data);
      T* o = static_cast<T*>(out[0].data);
      parallel_for(rows, rows * W > kParallelMin && rows > 1, [&](int64_t q) {
        T* po = o + q * W;
        int64_t off = 0;
        for (int d = rank - 1; d >= 0; --d) {
          const int64_t i = q % shape[d];
          q /= shape[d];
          off += (flip[d] ? shape[d] - 1 - i : i) * stride[d];
        }
        const T* src = x + off * W;
        if (flip_last) std::reverse_copy(src, src + W, po);
        else std::memcpy(po, src, sizeof(T) * W);
      });
    });
  }
};

std::unique_ptr<Kernel> flip_make(const KernelCtx& kc) {
  const Shape& s = kc.node.input(0).shape;
  const auto f = flip_dims(kc.node);
  Shape sz;
  std::vector<bool> fl;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 1) continue;
    if (!sz.empty() && fl.back() == f[d]) {
      sz.back() *= s[d];
    } else {
      sz.push_back(s[d]);
      fl.push_back(f[d]);
    }
  }
  auto k = std::make_unique<FlipKernel>();
  const int r = static_cast<int>(sz.size());
  if (r > kMaxDims + 1) kc.node.fail("too many dims");
  const int64_t n = shape_numel(s);
  if (r == 0 || n == 0) {  // nothing to reverse: a copy (or nothing)
    k->W = n;
    k->rows = n ? 1 : 0;
    return k;
  }
  k->rank = r - 1;
  int64_t st = 1;
  for (int d = r - 2; d >= 0; --d) {  // strides in rows
    k->shape[d] = sz[d];
    k->flip[d] = fl[d];
    k->stride[d] = st;
    st *= sz[d];
  }
  k->W = sz[r - 1];
  k->flip_last = fl[r - 1];
  k->rows = n / k->W;
  return k;
}

// ---- cumsum ----
// Result dtype: attr dtype, else self's, with bool and integers widened to
// int64 as torch does. self is converted to it before summing.
DType cumsum_dtype(const NodeCtx& ctx) {
  const DType in = ctx.input(0).dtype;
  const DType t = ctx.attr_dtype("dtype").value_or(dtype_is_float(in) ? in : DType::I64);
  if (t != DType::F32 && t != DType::F64 && t != DType::I64 && t != DType::BF16)
    ctx.fail(std::string("cumsum to ") + dtype_name(t) +
             " is not supported (float32, float64, bfloat16 or int64)");
  return t;
}

std::vector<TensorType> cumsum_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  wrap_dim(ctx, ctx.attr_int("dim"), rank_of(ctx.input(0)));
  return {{cumsum_dtype(ctx), ctx.input(0).shape}};
}

// self as [O, D, I]: each of the O * I lines sums along D in order, in a
// block of up to kBlock lines side by side (contiguous in I). float32 sums
// in double, as torch's CPU cumsum does.
struct CumsumKernel : Kernel {
  static constexpr int64_t kBlock = 64;
  int64_t O = 1, D = 1, I = 1;
  template <class S, class T>
  void go(const S* x, T* o) const {
    using A = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const int64_t nb = (I + kBlock - 1) / kBlock;
    parallel_for(O * nb, O * D * I > kParallelMin && O * nb > 1, [&](int64_t task) {
      const int64_t ob = task / nb, i0 = (task % nb) * kBlock, len = std::min(kBlock, I - i0);
      A acc[kBlock];
      std::fill(acc, acc + len, A(0));
      const int64_t base = ob * D * I + i0;
      for (int64_t d = 0; d < D; ++d) {
        const S* px = x + base + d * I;
        T* po = o + base + d * I;
        for (int64_t i = 0; i < len; ++i) {
          acc[i] = wrap_add(acc[i], static_cast<A>(convert<T>(px[i])));
          po[i] = static_cast<T>(acc[i]);
        }
      }
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data || O * D * I == 0) return;
    dispatch_dtype(in[0].dtype, [&](auto s) {
      using S = decltype(s);
      const S* x = in[0].as<const S>();
      switch (out[0].dtype) {
        case DType::F32: go(x, out[0].as<float>()); break;
        case DType::F64: go(x, out[0].as<double>()); break;
        default: go(x, out[0].as<int64_t>()); break;
      }
    });
  }
};

std::unique_ptr<Kernel> cumsum_make(const KernelCtx& kc) {
  const Shape& s = kc.node.input(0).shape;
  auto k = std::make_unique<CumsumKernel>();
  if (s.empty()) return k;  // 0-d: one line of one element
  const int64_t dim = wrap_dim(kc.node, kc.node.attr_int("dim"), rank_of(kc.node.input(0)));
  k->O = shape_numel(Shape(s.begin(), s.begin() + dim));
  k->D = s[dim];
  k->I = shape_numel(Shape(s.begin() + dim + 1, s.end()));
  return k;
}

}  // namespace

void register_repeat_ops(OpRegistry& r) {
  r.add(OpDef{"aten.repeat.default",
              "self tiled attr repeats times per dim (more entries than self's rank add leading dims); any dtype",
              &repeat_infer, &repeat_make, false, nullptr, false, -1, true});
  r.add(OpDef{"aten.flip.default", "self reversed along each dim of attr dims (negative dims wrap, no repeats); any dtype",
              &flip_infer, &flip_make, false, nullptr, false, -1, true});
  r.add(OpDef{"aten.cumsum.default",
              "running sum along attr dim, in order; attr dtype null: self's (bool/int -> int64); float32, "
              "float64, bfloat16 or int64 results (float32 sums in double, as torch's CPU kernel; "
              "bfloat16 through float32, each sum rounded)",
              &cumsum_infer, &cumsum_make});
}

}  // namespace ts

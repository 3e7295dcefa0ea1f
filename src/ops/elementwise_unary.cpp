// Unary elementwise ops, clone and _to_copy (a dtype cast). Transcendental
// ops on int/bool inputs compute in float32 (PyTorch's default dtype); the
// others keep the input dtype.
#include <cmath>

#include <algorithm>

#include "ops/broadcast.h"
#include "ops/tile.h"
#include "ops/vmath.h"

namespace ts {

namespace {

enum class Un {
  Neg, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Abs, Relu, Sigmoid, Tanh, Cos, Sin, Reciprocal, Sign,
  Erf, Gelu, GeluTanh
};

bool is_float_op(Un op) {
  return op == Un::Exp || op == Un::Expm1 || op == Un::Log || op == Un::Log1p || op == Un::Sqrt || op == Un::Rsqrt ||
         op == Un::Sigmoid || op == Un::Tanh || op == Un::Cos || op == Un::Sin || op == Un::Reciprocal ||
         op == Un::Erf || op == Un::Gelu || op == Un::GeluTanh;
}

template <class T, class F>
void un_loop(const T* a, T* o, int64_t n, F f) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { o[i] = f(a[i]); });
}

// The expression of each op, shared by the kernel loop and the float32 tile
// form: g(f) is called with the op's functor f(x). Not for bool.
template <class T, class G>
void with_un_fn(Un op, G&& g) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Un::Exp: return g([](T x) { return std::exp(x); });
      case Un::Expm1: return g([](T x) { return std::expm1(x); });
      case Un::Log: return g([](T x) { return std::log(x); });
      case Un::Log1p: return g([](T x) { return std::log1p(x); });
      case Un::Sqrt: return g([](T x) { return std::sqrt(x); });
      case Un::Rsqrt: return g([](T x) { return T(1) / std::sqrt(x); });
      case Un::Sigmoid: return g([](T x) { return T(1) / (T(1) + std::exp(-x)); });
      case Un::Tanh: return g([](T x) { return std::tanh(x); });
      case Un::Cos: return g([](T x) { return std::cos(x); });
      case Un::Sin: return g([](T x) { return std::sin(x); });
      case Un::Reciprocal: return g([](T x) { return T(1) / x; });
      case Un::Erf: return g([](T x) { return std::erf(x); });
      // GELU as PyTorch's CPU kernel writes it: x/2 (1 + erf(x/sqrt2)), or
      // the tanh approximation x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
      case Un::Gelu:
        return g([](T x) { return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2))); });
      case Un::GeluTanh:
        return g([](T x) {
          const T k = T(M_SQRT2 * M_2_SQRTPI * 0.5);
          return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
        });
      default: break;
    }
  }
  switch (op) {
    case Un::Neg: return g([](T x) { return wrap_neg(x); });
    case Un::Abs:
      if constexpr (std::is_unsigned_v<T>) return g([](T x) { return x; });
      else return g([](T x) { return x < 0 ? wrap_neg(x) : x; });
    case Un::Relu:  // NaN propagates, as in PyTorch (x < 0 is false for NaN)
      return g([](T x) { return x < 0 ? T(0) : x; });
    case Un::Sign:
      return g([](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
    default: break;
  }
}

// Float32 transcendental ops through the vector math (ops/vmath.h), the
// same formulas as with_un_fn with the scalar call replaced; false for the
// other ops. Works through a stack buffer, so o may equal a.
bool has_vec_form(Un op) {
  return op == Un::Exp || op == Un::Log || op == Un::Erf || op == Un::Tanh || op == Un::Gelu ||
         op == Un::GeluTanh || op == Un::Sigmoid;
}

TS_INLINE void vec_un_loop(Un op, const float* a, float* o, int64_t n) {
  constexpr int64_t kChunk = 256;
  float t[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const float* x = a + i0;
    float* y = o + i0;
    switch (op) {
      case Un::Exp: vexp(x, y, m); break;
      case Un::Log: vlog(x, y, m); break;
      case Un::Erf: verf(x, y, m); break;
      case Un::Tanh: vtanh(x, y, m); break;
      case Un::Gelu:
        for (int64_t i = 0; i < m; ++i) t[i] = x[i] * float(M_SQRT1_2);
        verf(t, t, m);
        for (int64_t i = 0; i < m; ++i) y[i] = x[i] * 0.5f * (1.0f + t[i]);
        break;
      case Un::GeluTanh: {
        const float k = float(M_SQRT2 * M_2_SQRTPI * 0.5);
        for (int64_t i = 0; i < m; ++i) t[i] = k * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
        vtanh(t, t, m);
        for (int64_t i = 0; i < m; ++i) y[i] = 0.5f * x[i] * (1.0f + t[i]);
        break;
      }
      case Un::Sigmoid:
        for (int64_t i = 0; i < m; ++i) t[i] = -x[i];
        vexp(t, t, m);
        for (int64_t i = 0; i < m; ++i) y[i] = 1.0f / (1.0f + t[i]);
        break;
      default: break;
    }
  }
}

#if TS_X86
// The loops around the vector calls, vectorised 512 bits wide (tile.h's IsaTile).
TS_AVX512 void vec_un_avx512(Un op, const float* a, float* o, int64_t n) { vec_un_loop(op, a, o, n); }
#endif

void vec_un(Un op, const float* a, float* o, int64_t n) {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return vec_un_avx512(op, a, o, n);
#endif
  vec_un_loop(op, a, o, n);
}

struct VecUnaryTile : TileOp {
  Un op;
  explicit VecUnaryTile(Un o) : op(o) {}
  void run(const float* const* in, float* out, int64_t n) const override { vec_un(op, in[0], out, n); }
};

template <class T>
void run_un(Un op, const T* a, T* o, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (has_vec_form(op)) {
      constexpr int64_t kBlock = 4096;
      const int64_t blocks = (n + kBlock - 1) / kBlock;
      parallel_for(blocks, n > kParallelMin, [&](int64_t b) {
        vec_un(op, a + b * kBlock, o + b * kBlock, std::min(kBlock, n - b * kBlock));
      });
      return;
    }
  }
  if constexpr (std::is_same_v<T, bool>) {
    std::memcpy(o, a, static_cast<size_t>(n));  // abs/sign of bool: identity
  } else {
    with_un_fn<T>(op, [&](auto f) { un_loop(a, o, n, f); });
  }
}

struct UnKernel : Kernel {
  Un op;
  DType dt;  // output (and compute) dtype
  CastSlot slot;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const void* a = slot.get(in[0], dt);
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      run_un(op, static_cast<const T*>(a), out[0].as<T>(), out[0].numel());
    });
  }
};

template <Un OP>
std::vector<TensorType> un_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  TensorType t = ctx.input(0);
  t.wrapped = false;
  if (is_float_op(OP) && !dtype_is_float(t.dtype)) t.dtype = DType::F32;
  if ((OP == Un::Neg || OP == Un::Relu) && t.dtype == DType::Bool)
    ctx.fail("not supported for bool tensors");
  return {t};
}

template <Un OP>
std::unique_ptr<Kernel> un_make(const KernelCtx& kc) {
  auto k = std::make_unique<UnKernel>();
  k->op = OP;
  k->dt = kc.outputs[0].dtype;
  k->slot.prepare(kc.node.input(0), k->dt);
  return k;
}

// Float32 output; the input float32, bool (cast to 0/1 as the kernel's
// CastSlot does) or one element.
template <Un OP>
std::unique_ptr<TileOp> un_tile(const NodeCtx& ctx) {
  if (!tile_operands_ok(ctx) || un_infer<OP>(ctx)[0].dtype != DType::F32) return nullptr;
  if (has_vec_form(OP)) return std::make_unique<VecUnaryTile>(OP);
  std::unique_ptr<TileOp> r;
  with_un_fn<float>(OP, [&](auto f) { r = std::make_unique<UnaryTile<decltype(f)>>(f); });
  return r;
}

// gelu: the `approximate` attr picks the formula.
Un gelu_kind(const NodeCtx& ctx) {
  const std::string a = ctx.has_attr("approximate") ? ctx.attr_str("approximate") : "none";
  if (a != "none" && a != "tanh") ctx.fail("approximate must be 'none' or 'tanh', got '" + a + "'");
  return a == "tanh" ? Un::GeluTanh : Un::Gelu;
}

std::vector<TensorType> gelu_infer(const NodeCtx& ctx) {
  gelu_kind(ctx);
  return un_infer<Un::Gelu>(ctx);
}

std::unique_ptr<Kernel> gelu_make(const KernelCtx& kc) {
  return gelu_kind(kc.node) == Un::Gelu ? un_make<Un::Gelu>(kc) : un_make<Un::GeluTanh>(kc);
}

std::unique_ptr<TileOp> gelu_tile(const NodeCtx& ctx) {
  return gelu_kind(ctx) == Un::Gelu ? un_tile<Un::Gelu>(ctx) : un_tile<Un::GeluTanh>(ctx);
}

// clone and _to_copy between float32 and bool: 0/1 floats stay, a float
// becomes bool as cast_buffer makes it (nonzero, NaN included, is true).
std::unique_ptr<TileOp> copy_tile_for(const NodeCtx& ctx, DType out) {
  const DType in = ctx.input(0).dtype;
  auto fb = [](DType t) { return t == DType::F32 || t == DType::Bool; };
  if (!fb(in) || !fb(out)) return nullptr;
  if (in == DType::F32 && out == DType::Bool) {
    auto f = [](float x) { return static_cast<bool>(x) ? 1.0f : 0.0f; };
    return std::make_unique<UnaryTile<decltype(f)>>(f);
  }
  auto f = [](float x) { return x; };
  return std::make_unique<UnaryTile<decltype(f)>>(f);
}

std::vector<TensorType> clone_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  return {{ctx.input(0).dtype, ctx.input(0).shape}};
}

std::unique_ptr<Kernel> clone_make(const KernelCtx&) {
  return make_fn_kernel([](const Tensor* in, Tensor* out) {
    if (out[0].data) cast_buffer(in[0].data, in[0].dtype, out[0].data, out[0].dtype, in[0].numel());
  });
}

std::vector<TensorType> to_copy_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  return {{ctx.attr_dtype("dtype").value_or(ctx.input(0).dtype), ctx.input(0).shape}};
}

std::unique_ptr<TileOp> clone_tile(const NodeCtx& ctx) {
  return copy_tile_for(ctx, clone_infer(ctx)[0].dtype);
}

std::unique_ptr<TileOp> to_copy_tile(const NodeCtx& ctx) {
  return copy_tile_for(ctx, to_copy_infer(ctx)[0].dtype);
}

// ---- clamp(self, min?, max?) ----
// Output dtype by promotion with the bounds as wrapped scalars (an int tensor
// with a float bound gives float32). NaN propagates; min > max gives max.
std::vector<TensorType> clamp_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const bool lo = ctx.has_attr("min"), hi = ctx.has_attr("max");
  if (!lo && !hi) ctx.fail("at least one of 'min' or 'max' must be given");
  std::vector<TensorType> ops = {ctx.input(0)};
  if (lo) ops.push_back(scalar_attr_type(ctx, "min"));
  if (hi) ops.push_back(scalar_attr_type(ctx, "max"));
  TensorType t{result_type(ops), ctx.input(0).shape};
  if (t.dtype == DType::Bool) ctx.fail("not supported for bool tensors with bool bounds");
  return {t};
}

template <class T>
struct ClampFn {
  T lo, hi;
  bool has_lo, has_hi;
  T operator()(T x) const {
    T v = has_lo && x < lo ? lo : x;  // comparisons with NaN are false: NaN stays
    return has_hi && v > hi ? hi : v;
  }
};

// The bounds in dtype dt (whose C++ type is T), as the kernel stores them.
template <class T>
ClampFn<T> clamp_fn(const NodeCtx& ctx, DType dt) {
  auto bound = [&](const char* key, T& v) {
    if (!ctx.has_attr(key)) return false;
    double d = ctx.attr_float(key);
    int64_t i = ctx.attrs().at(key).is_number_integer() || ctx.attrs().at(key).is_boolean()
                    ? ctx.attr_int(key)
                    : static_cast<int64_t>(d);
    store_scalar(&v, dt, d, i);
    return true;
  };
  ClampFn<T> f{};
  f.has_lo = bound("min", f.lo);
  f.has_hi = bound("max", f.hi);
  return f;
}

template <class T>
struct ClampKernel : Kernel {
  ClampFn<T> f;
  DType dt;
  CastSlot slot;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    un_loop(static_cast<const T*>(slot.get(in[0], dt)), out[0].as<T>(), out[0].numel(), f);
  }
};

std::unique_ptr<Kernel> clamp_make(const KernelCtx& kc) {
  const DType dt = kc.outputs[0].dtype;
  std::unique_ptr<Kernel> k;
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {  // infer refuses bool
      auto ck = std::make_unique<ClampKernel<T>>();
      ck->f = clamp_fn<T>(kc.node, dt);
      ck->dt = dt;
      ck->slot.prepare(kc.node.input(0), dt);
      k = std::move(ck);
    }
  });
  return k;
}

std::unique_ptr<TileOp> clamp_tile(const NodeCtx& ctx) {
  if (!tile_operands_ok(ctx) || ctx.input(0).dtype != DType::F32 ||
      clamp_infer(ctx)[0].dtype != DType::F32)
    return nullptr;
  return std::make_unique<UnaryTile<ClampFn<float>>>(clamp_fn<float>(ctx, DType::F32));
}

template <Un OP>
OpDef un_def(const std::string& name, const std::string& doc) {
  static constexpr PwCode code[] = {PwCode::Neg,     PwCode::Exp,   PwCode::Expm1, PwCode::Log,
                                    PwCode::Log1p,   PwCode::Sqrt,  PwCode::Rsqrt, PwCode::Abs,
                                    PwCode::Relu,    PwCode::Sigmoid, PwCode::Tanh, PwCode::Cos,
                                    PwCode::Sin,     PwCode::Reciprocal, PwCode::Sign, PwCode::Erf,
                                    PwCode::Gelu,    PwCode::Gelu};
  OpDef d{name, doc, &un_infer<OP>, &un_make<OP>, false, &un_tile<OP>, true};
  d.pointwise = {code[static_cast<int>(OP)]};
  return d;
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& r) {
  const std::string fl = "; float32/float64 (int/bool inputs give float32)";
  OpDef neg = un_def<Un::Neg>("aten.neg.default", "-self; any dtype but bool");
  neg.algebra.involution = true;
  r.add(std::move(neg));
  r.add(un_def<Un::Exp>("aten.exp.default", "exp(self)" + fl));
  // exp(x) - 1 without the cancellation near 0 (the optimizers' bias corrections).
  r.add(un_def<Un::Expm1>("aten.expm1.default", "exp(self) - 1, accurate near 0" + fl));
  r.add(un_def<Un::Log>("aten.log.default", "natural log(self)" + fl));
  r.add(un_def<Un::Log1p>("aten.log1p.default", "log(1 + self), accurate near 0" + fl));
  r.add(un_def<Un::Sqrt>("aten.sqrt.default", "sqrt(self)" + fl));
  r.add(un_def<Un::Rsqrt>("aten.rsqrt.default", "1 / sqrt(self)" + fl));
  r.add(un_def<Un::Abs>("aten.abs.default", "|self|; any dtype"));
  OpDef relu = un_def<Un::Relu>("aten.relu.default", "max(self, 0), NaN propagates; any dtype but bool");
  relu.fuse_role = FuseRole::Relu;
  r.add(std::move(relu));
  r.add(un_def<Un::Sigmoid>("aten.sigmoid.default", "1 / (1 + exp(-self))" + fl));
  r.add(un_def<Un::Tanh>("aten.tanh.default", "tanh(self)" + fl));
  r.add(un_def<Un::Cos>("aten.cos.default", "cos(self), self in radians" + fl));
  r.add(un_def<Un::Sin>("aten.sin.default", "sin(self), self in radians" + fl));
  r.add(un_def<Un::Reciprocal>("aten.reciprocal.default", "1 / self" + fl));
  r.add(un_def<Un::Erf>("aten.erf.default", "error function erf(self)" + fl));
  OpDef gelu{"aten.gelu.default", "GELU: self/2 (1 + erf(self/sqrt2)), or with attr approximate 'tanh' "
             "self/2 (1 + tanh(sqrt(2/pi) (self + 0.044715 self^3)))" + fl,
             &gelu_infer, &gelu_make, false, &gelu_tile, true};
  gelu.pointwise = {PwCode::Gelu};
  r.add(std::move(gelu));
  r.add(un_def<Un::Sign>("aten.sign.default", "-1, 0 or 1 by sign of self (NaN -> 0); any dtype"));
  OpDef clamp{"aten.clamp.default",
              "min(max(self, min), max) with attr min and/or max (null: no bound); NaN "
              "propagates, min > max gives max; dtype by promotion with the bounds as scalars",
              &clamp_infer, &clamp_make, false, &clamp_tile, true};
  clamp.pointwise = {PwCode::Clamp};
  r.add(std::move(clamp));
  OpDef clone{"aten.clone.default", "copy of self; any dtype; memory_format ignored (all tensors are contiguous)",
              &clone_infer, &clone_make, false, &clone_tile, true, true};
  // The same elements in the same order.
  clone.strided_view = [](const NodeCtx&, const StridedView& in, const Shape&) {
    return std::optional<StridedView>(in);
  };
  clone.bf16 = Bf16::Native;  // cast_buffer: bytes, or one rounding
  r.add(std::move(clone));
  OpDef to_copy{"aten._to_copy.default", "self cast to attr dtype (null keeps it); other attrs ignored",
                &to_copy_infer, &clone_make, false, &to_copy_tile, true, true};
  to_copy.algebra.value_cast = true;
  to_copy.pointwise = {PwCode::Cast};
  to_copy.bf16 = Bf16::Native;
  r.add(std::move(to_copy));
}

}  // namespace ts

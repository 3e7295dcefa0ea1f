// Broadcasting binary ops (arithmetic, comparisons, pow, maximum/minimum),
// their Scalar-attribute variants, aten.where.self and aten.masked_fill.Scalar.
//
// Operands whose dtype differs from the compute dtype are cast first (into a
// scratch buffer allocated in make(), or an inline slot for one-element
// operands), so the loops are templated on one compute type only: float,
// double, int64 or bool. int32/uint8 results are computed in int64 and cast.
#include "ops/elementwise_binary.h"

#include <cmath>

#include "ops/bf16_kernel.h"
#include "ops/broadcast.h"
#include "ops/tile.h"

namespace ts {

namespace {

enum class Bin { Add, Sub, Mul, Div, Max, Min, Pow, Eq, Ne, Lt, Le, Gt, Ge };

bool is_cmp(Bin op) { return op >= Bin::Eq; }

template <class T>
T int_pow(T b, T e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  T r = 1;
  while (e) {
    if (e & 1) r = wrap_mul(r, b);
    b = wrap_mul(b, b);
    e >>= 1;
  }
  return r;
}

// The elementwise loop over a plan with the three fast paths: same shape,
// one operand a single element, and general broadcast rows.
template <class T, class O, class F>
void bin_loop(const BcastPlan& p, const T* a, const T* b, O* o, F f) {
  const int64_t n = p.numel;
  if (p.flat[0] && p.flat[1]) {
    parallel_for(n, n > kParallelMin, [&](int64_t i) { o[i] = f(a[i], b[i]); });
  } else if (p.scalar[0] && p.flat[1]) {
    const T av = a[0];
    parallel_for(n, n > kParallelMin, [&](int64_t i) { o[i] = f(av, b[i]); });
  } else if (p.flat[0] && p.scalar[1]) {
    const T bv = b[0];
    parallel_for(n, n > kParallelMin, [&](int64_t i) { o[i] = f(a[i], bv); });
  } else {
    bcast_for_rows(p, [&](int64_t oo, const int64_t* off, int64_t len, const int64_t* st) {
      const T* pa = a + off[0];
      const T* pb = b + off[1];
      O* po = o + oo;
      if (st[0] && st[1]) {
        for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i], pb[i]);
      } else if (st[1]) {
        const T av = pa[0];
        for (int64_t i = 0; i < len; ++i) po[i] = f(av, pb[i]);
      } else if (st[0]) {
        const T bv = pb[0];
        for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i], bv);
      } else {
        const O v = f(pa[0], pb[0]);
        for (int64_t i = 0; i < len; ++i) po[i] = v;
      }
    });
  }
}

// The expression of each op, shared by the kernel loops and the float32
// tile form (so fused and unfused results agree bit for bit): g(f) is
// called with the op's functor f(x, y).
template <class T, class G>
void with_arith_fn(Bin op, T al, G&& g) {
  const bool unit = al == T(1);
  switch (op) {
    case Bin::Add:
      if (unit) g([](T x, T y) { return wrap_add(x, y); });
      else g([al](T x, T y) { return wrap_add(x, wrap_mul(al, y)); });
      break;
    case Bin::Sub:
      if (unit) g([](T x, T y) { return wrap_sub(x, y); });
      else g([al](T x, T y) { return wrap_sub(x, wrap_mul(al, y)); });
      break;
    case Bin::Mul: g([](T x, T y) { return wrap_mul(x, y); }); break;
    case Bin::Div: g([](T x, T y) { return x / y; }); break;
    case Bin::Max: g([](T x, T y) { return (x > y || x != x) ? x : y; }); break;
    case Bin::Min: g([](T x, T y) { return (x < y || x != x) ? x : y; }); break;
    default:  // Pow
      if constexpr (std::is_floating_point_v<T>) g([](T x, T y) { return std::pow(x, y); });
      else g([](T x, T y) { return int_pow(x, y); });
  }
}

// bool arithmetic: add/max are "or", mul/min "and" (bin_types refuses sub
// and pow; div computes in float32); alpha plays no part.
template <class G>
void with_bool_fn(Bin op, G&& g) {
  if (op == Bin::Add || op == Bin::Max) g([](bool x, bool y) { return static_cast<bool>(x | y); });
  else g([](bool x, bool y) { return static_cast<bool>(x & y); });
}

template <class T, class G>
void with_cmp_fn(Bin op, G&& g) {
  switch (op) {
    case Bin::Eq: g([](T x, T y) { return x == y; }); break;
    case Bin::Ne: g([](T x, T y) { return x != y; }); break;
    case Bin::Lt: g([](T x, T y) { return x < y; }); break;
    case Bin::Le: g([](T x, T y) { return x <= y; }); break;
    case Bin::Gt: g([](T x, T y) { return x > y; }); break;
    default: g([](T x, T y) { return x >= y; }); break;
  }
}

// pow with a constant exponent: the common exponents avoid std::pow (as
// PyTorch does), which is both faster and what PyTorch computes.
template <class T, class G>
void with_pow_scalar_fn(double expo, G&& g) {
  const T e = static_cast<T>(expo);
  if (expo == 2) g([](T x) { return x * x; });
  else if (expo == 3) g([](T x) { return x * x * x; });
  else if (expo == 0.5) g([](T x) { return std::sqrt(x); });
  else if (expo == -0.5) g([](T x) { return T(1) / std::sqrt(x); });
  else if (expo == -1) g([](T x) { return T(1) / x; });
  else if (expo == -2) g([](T x) { return T(1) / (x * x); });
  else if (expo == 1) g([](T x) { return x; });
  else g([e](T x) { return std::pow(x, e); });
}

struct BinKernel : Kernel {
  Bin op;
  DType ct;      // compute dtype
  DType res_dt;  // dtype the loop writes (ct, or bool for comparisons)
  DType out_dt;  // output dtype
  BcastPlan plan;
  CastSlot slot[2];
  bool other_attr = false;  // operand 1 is a scalar attribute
  alignas(16) unsigned char other[16] = {};
  double alpha = 1.0;
  int64_t alpha_i = 1;
  double expo = 0.0;        // pow.Tensor_Scalar exponent
  bool scalar_pow = false;
  Buffer out_scratch;

  template <class T>
  void run_typed(const T* a, const T* b, void* out) {
    const BcastPlan& p = plan;
    if (is_cmp(op)) {
      bool* o = static_cast<bool*>(out);
      with_cmp_fn<T>(op, [&](auto f) { bin_loop(p, a, b, o, f); });
      return;
    }
    T* o = static_cast<T*>(out);
    if constexpr (std::is_same_v<T, bool>) {
      with_bool_fn(op, [&](auto f) { bin_loop(p, a, b, o, f); });
    } else {
      const T al = std::is_floating_point_v<T> ? static_cast<T>(alpha) : static_cast<T>(alpha_i);
      if constexpr (std::is_floating_point_v<T>) {
        if (op == Bin::Pow && scalar_pow) {
          const int64_t n = p.numel;
          with_pow_scalar_fn<T>(expo, [&](auto f) {
            parallel_for(n, n > kParallelMin, [&](int64_t i) { o[i] = f(a[i]); });
          });
          return;
        }
      }
      with_arith_fn<T>(op, al, [&](auto f) { bin_loop(p, a, b, o, f); });
    }
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const void* a = slot[0].get(in[0], ct);
    const void* b = other_attr ? static_cast<const void*>(other) : slot[1].get(in[1], ct);
    void* o = out_dt == res_dt ? out[0].data : out_scratch.data();
    dispatch_dtype(ct, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, int64_t> || std::is_same_v<T, bool>)
        run_typed(static_cast<const T*>(a), static_cast<const T*>(b), o);
    });
    if (o != out[0].data) cast_buffer(o, res_dt, out[0].data, out_dt, plan.numel);
  }
};

// Operand types: input 0, and input 1 or the scalar attribute `other`.
template <bool Attr>
std::vector<TensorType> operand_types(const NodeCtx& ctx, const char* key) {
  if (Attr) {
    ctx.expect_inputs(1);
    return {ctx.input(0), scalar_attr_type(ctx, key)};
  }
  ctx.expect_inputs(2);
  return {ctx.input(0), ctx.input(1)};
}

// Returns {compute dtype, output dtype} for op over operand types.
std::pair<DType, DType> bin_types(const NodeCtx& ctx, Bin op, const std::vector<TensorType>& t) {
  DType r = result_type(t);
  if (is_cmp(op)) return {compute_dtype(r), DType::Bool};
  if (op == Bin::Div && !dtype_is_float(r)) r = DType::F32;  // true division
  if (r == DType::Bool && op == Bin::Sub)
    ctx.fail("subtraction of bool tensors is not supported; use logical_xor");
  if (r == DType::Bool && (op == Bin::Pow))
    ctx.fail("pow is not supported for bool tensors");
  return {compute_dtype(r), r};
}

template <Bin OP, bool Attr>
std::vector<TensorType> bin_infer(const NodeCtx& ctx) {
  const char* key = OP == Bin::Pow ? "exponent" : "other";
  auto t = operand_types<Attr>(ctx, key);
  auto [ct, out] = bin_types(ctx, OP, t);
  if (OP == Bin::Pow && Attr && !dtype_is_float(out)) {
    if (ctx.attrs().at("exponent").is_number_integer() && ctx.attr_int("exponent") < 0)
      ctx.fail("integers to negative integer powers are not allowed");
  }
  // As PyTorch: an integer (or bool) result takes no floating-point alpha.
  if (ctx.has_attr("alpha") && !dtype_is_float(ct) && ctx.attrs().at("alpha").is_number_float())
    ctx.fail("for integral input tensors, alpha must not be a floating point number, got " +
             ctx.attrs().at("alpha").dump());
  return {{out, broadcast_shapes(ctx, {t[0].shape, t[1].shape})}};
}

template <Bin OP, bool Attr>
std::unique_ptr<Kernel> bin_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const char* key = OP == Bin::Pow ? "exponent" : "other";
  auto t = operand_types<Attr>(ctx, key);
  auto k = std::make_unique<BinKernel>();
  k->op = OP;
  std::tie(k->ct, k->out_dt) = bin_types(ctx, OP, t);
  k->res_dt = is_cmp(OP) ? DType::Bool : k->ct;
  const Shape& out_shape = kc.outputs[0].shape;
  k->plan = make_bcast_plan(ctx, out_shape, {t[0].shape, t[1].shape});
  k->slot[0].prepare(t[0], k->ct);
  if (Attr) {
    k->other_attr = true;
    double d = ctx.attr_float(key);
    int64_t i = ctx.attrs().at(key).is_number_integer() || ctx.attrs().at(key).is_boolean()
                    ? ctx.attr_int(key)
                    : int_of_float(d);
    store_scalar(k->other, k->ct, d, i);
    if (OP == Bin::Pow && dtype_is_float(k->ct) && k->plan.flat[0]) {
      k->scalar_pow = true;
      k->expo = d;
    }
  } else {
    k->slot[1].prepare(t[1], k->ct);
  }
  if (ctx.has_attr("alpha")) {
    k->alpha = ctx.attr_float("alpha");
    k->alpha_i = ctx.attrs().at("alpha").is_number_integer() ? ctx.attr_int("alpha")
                                                               : int_of_float(k->alpha);
  }
  if (k->out_dt != k->res_dt)
    k->out_scratch = Buffer(static_cast<size_t>(shape_numel(out_shape)) * dtype_size(k->res_dt));
  return k;
}

// ---- float32 tile forms ----
// Arithmetic needs a float32 compute and output dtype; comparisons compare
// in float32, or in bool (0/1 floats compare alike).
template <Bin OP, bool Attr>
std::unique_ptr<TileOp> bin_tile(const NodeCtx& ctx) {
  const char* key = OP == Bin::Pow ? "exponent" : "other";
  auto t = operand_types<Attr>(ctx, key);
  auto [ct, out] = bin_types(ctx, OP, t);
  if (!tile_operands_ok(ctx)) return nullptr;
  const bool bool_arith = !is_cmp(OP) && ct == DType::Bool && out == DType::Bool;
  if (is_cmp(OP) ? (ct != DType::F32 && ct != DType::Bool)
                 : !bool_arith && (ct != DType::F32 || out != DType::F32))
    return nullptr;
  float other = 0;
  if (Attr) {  // the attribute as the kernel stores it in ct, then as float
    double d = ctx.attr_float(key);
    int64_t i = ctx.attrs().at(key).is_number_integer() || ctx.attrs().at(key).is_boolean()
                    ? ctx.attr_int(key)
                    : int_of_float(d);
    alignas(16) unsigned char v[16] = {};
    store_scalar(v, ct, d, i);
    cast_buffer(v, ct, &other, DType::F32, 1);
  }
  std::unique_ptr<TileOp> r;
  if (is_cmp(OP)) {
    with_cmp_fn<float>(OP, [&](auto f) {
      if (Attr) r = std::make_unique<BinaryConstTile<decltype(f), true>>(f, other);
      else r = std::make_unique<BinaryTile<decltype(f), true>>(f);
    });
    return r;
  }
  if (bool_arith) {  // on 0/1 floats, through the bool kernel's functor
    with_bool_fn(OP, [&](auto f) {
      auto g = [f](float x, float y) { return f(x != 0.0f, y != 0.0f); };
      if (Attr) r = std::make_unique<BinaryConstTile<decltype(g), true>>(g, other);
      else r = std::make_unique<BinaryTile<decltype(g), true>>(g);
    });
    return r;
  }
  if (OP == Bin::Pow && Attr) {
    with_pow_scalar_fn<float>(ctx.attr_float(key),
                              [&](auto f) { r = std::make_unique<UnaryTile<decltype(f)>>(f); });
    return r;
  }
  const float al = ctx.has_attr("alpha") ? static_cast<float>(ctx.attr_float("alpha")) : 1.0f;
  with_arith_fn<float>(OP, al, [&](auto f) {
    if (Attr) r = std::make_unique<BinaryConstTile<decltype(f)>>(f, other);
    else r = std::make_unique<BinaryTile<decltype(f)>>(f);
  });
  return r;
}

// ---- where.self ----
// Operands full-size or one element (C1/A1/B1): the loop the fast path and
// the tile form share.
// (One-element operands are read before the loop and bool conditions as
// bytes: both keep GCC vectorising it.)
template <class T, bool C1, bool A1, bool B1, class C>
TS_INLINE void where_loop(const C* c, const T* a, const T* b, T* o, int64_t n) {
  if (n <= 0) return;
  const C c0 = c[0];
  const T a0 = a[0], b0 = b[0];
  for (int64_t i = 0; i < n; ++i) {
    const T x = A1 ? a0 : a[i], y = B1 ? b0 : b[i];
    o[i] = (C1 ? c0 : c[i]) != 0 ? x : y;
  }
}

template <class T, bool C1, bool A1, bool B1>
void where_flat(const bool* cond, const T* a, const T* b, T* o, int64_t n) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(cond);
  if (n <= kParallelMin) return where_loop<T, C1, A1, B1>(c, a, b, o, n);
  parallel_region(true, [&](int t, int nt) {
    int64_t i0, i1;
    split_range(n, t, nt, i0, i1);
    where_loop<T, C1, A1, B1>(c + (C1 ? 0 : i0), a + (A1 ? 0 : i0), b + (B1 ? 0 : i0),
                              o + i0, i1 - i0);
  });
}

// cond arrives as 0/1 floats.
struct WhereTile : IsaTile<WhereTile> {
  TS_INLINE void loop(const float* const* in, float* out, int64_t n) const {
    const float* c = in[0];
    const float* a = in[1];
    const float* b = in[2];
    where_loop<float, false, false, false>(c, a, b, out, n);
  }
};

struct WhereKernel : Kernel {
  DType ct, out_dt;
  BcastPlan plan;
  CastSlot slot[2];
  Buffer out_scratch;

  template <class T>
  void run_typed(const bool* c, const T* a, const T* b, T* o) {
    const BcastPlan& p = plan;
    // Fast path: every operand full-size or a single element.
    const bool s0 = !p.flat[0], s1 = !p.flat[1], s2 = !p.flat[2];
    if ((p.flat[0] || p.scalar[0]) && (p.flat[1] || p.scalar[1]) && (p.flat[2] || p.scalar[2])) {
      const int sel = (s0 ? 4 : 0) | (s1 ? 2 : 0) | (s2 ? 1 : 0);
      switch (sel) {
        case 0: return where_flat<T, false, false, false>(c, a, b, o, p.numel);
        case 1: return where_flat<T, false, false, true>(c, a, b, o, p.numel);
        case 2: return where_flat<T, false, true, false>(c, a, b, o, p.numel);
        case 3: return where_flat<T, false, true, true>(c, a, b, o, p.numel);
        case 4: return where_flat<T, true, false, false>(c, a, b, o, p.numel);
        case 5: return where_flat<T, true, false, true>(c, a, b, o, p.numel);
        case 6: return where_flat<T, true, true, false>(c, a, b, o, p.numel);
        default: return where_flat<T, true, true, true>(c, a, b, o, p.numel);
      }
    }
    bcast_for_rows(p, [&](int64_t oo, const int64_t* off, int64_t len, const int64_t* st) {
      const bool* pc = c + off[0];
      const T* pa = a + off[1];
      const T* pb = b + off[2];
      T* po = o + oo;
      if (st[0] && !st[1] && !st[2]) {  // masked fill with two scalars
        const T av = pa[0], bv = pb[0];
        for (int64_t i = 0; i < len; ++i) po[i] = pc[i] ? av : bv;
      } else if (st[0] && st[1] && !st[2]) {
        const T bv = pb[0];
        for (int64_t i = 0; i < len; ++i) po[i] = pc[i] ? pa[i] : bv;
      } else {
        for (int64_t i = 0; i < len; ++i) po[i] = pc[i * st[0]] ? pa[i * st[1]] : pb[i * st[2]];
      }
    });
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const void* a = slot[0].get(in[1], ct);
    const void* b = slot[1].get(in[2], ct);
    void* o = out_dt == ct ? out[0].data : out_scratch.data();
    if (ct == DType::BF16) {  // selection of bfloat16 bit patterns
      run_typed(in[0].as<bool>(), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                static_cast<uint16_t*>(o));
      return;
    }
    dispatch_dtype(ct, [&](auto tag) {
      using T = decltype(tag);
      run_typed(in[0].as<bool>(), static_cast<const T*>(a), static_cast<const T*>(b),
                static_cast<T*>(o));
    });
    if (o != out[0].data) cast_buffer(o, ct, out[0].data, out_dt, plan.numel);
  }
};

std::vector<TensorType> where_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  ctx.expect_dtype(0, DType::Bool);
  DType r = result_type({ctx.input(1), ctx.input(2)});
  return {{r, broadcast_shapes(ctx, {ctx.input(0).shape, ctx.input(1).shape, ctx.input(2).shape})}};
}

// A bfloat16 result selects bit patterns when each value operand is
// bfloat16, or a one-element float operand that torch's promotion casts to
// bfloat16: rounded once (a float64 through float32, as c10 converts), as
// the float32 twin would round its selected value. Other operands (integer
// or bool tensors) take the float32 twin.
bool where_selects_bf16(const NodeCtx& ctx, DType out) {
  if (out != DType::BF16) return false;
  for (int i = 1; i <= 2; ++i) {
    const TensorType& t = ctx.input(i);
    const bool one_float = (t.dtype == DType::F32 || t.dtype == DType::F64) && t.numel() == 1;
    if (t.dtype != DType::BF16 && !one_float) return false;
  }
  return true;
}

std::unique_ptr<Kernel> where_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const DType out_dt = kc.outputs[0].dtype;
  if (out_dt == DType::BF16 && !where_selects_bf16(ctx, out_dt))
    return make_via_float32(*OpRegistry::get().find(ctx.op()), kc);
  auto k = std::make_unique<WhereKernel>();
  k->out_dt = out_dt;
  k->ct = out_dt == DType::BF16 ? DType::BF16 : compute_dtype(out_dt);
  k->plan = make_bcast_plan(ctx, kc.outputs[0].shape,
                            {ctx.input(0).shape, ctx.input(1).shape, ctx.input(2).shape});
  k->slot[0].prepare(ctx.input(1), k->ct);
  k->slot[1].prepare(ctx.input(2), k->ct);
  if (k->out_dt != k->ct) k->out_scratch = Buffer(kc.outputs[0].nbytes() / dtype_size(k->out_dt) * 8);
  return k;
}

std::unique_ptr<TileOp> where_tile(const NodeCtx& ctx) {
  if (!tile_operands_ok(ctx)) return nullptr;
  if (result_type({ctx.input(1), ctx.input(2)}) != DType::F32) return nullptr;
  return std::make_unique<WhereTile>();
}

// ---- masked_fill.Scalar: mask ? value : self ----
// As ATen: the result is self and mask broadcast together, in self's dtype;
// the value is cast to that dtype.
std::vector<TensorType> masked_fill_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  ctx.expect_dtype(1, DType::Bool);
  scalar_attr_type(ctx, "value");
  return {{ctx.input(0).dtype, broadcast_shapes(ctx, {ctx.input(0).shape, ctx.input(1).shape})}};
}

struct MaskedFillTile : IsaTile<MaskedFillTile> {
  float v;
  explicit MaskedFillTile(float value) : v(value) {}
  TS_INLINE void loop(const float* const* in, float* out, int64_t n) const {
    const float* a = in[0];
    const float* m = in[1];
    for (int64_t i = 0; i < n; ++i) out[i] = m[i] != 0 ? v : a[i];
  }
};

struct MaskedFillKernel : Kernel {
  BcastPlan plan;  // operands: self, mask
  alignas(16) unsigned char value[16] = {};
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    by_elem_size(dtype_size(in[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      const T* a = static_cast<const T*>(in[0].data);
      const uint8_t* m = static_cast<const uint8_t*>(in[1].data);
      T* o = static_cast<T*>(out[0].data);
      T v;
      std::memcpy(&v, value, sizeof(T));
      bcast_for_rows(plan, [&](int64_t oo, const int64_t* off, int64_t len, const int64_t* st) {
        const T* pa = a + off[0];
        const uint8_t* pm = m + off[1];
        T* po = o + oo;
        const T val = v;  // a local: the captured one would be re-read after every store
        if (st[0] && st[1]) {
          for (int64_t i = 0; i < len; ++i) po[i] = pm[i] ? val : pa[i];
        } else {
          for (int64_t i = 0; i < len; ++i) po[i] = pm[i * st[1]] ? val : pa[i * st[0]];
        }
      });
    });
  }

  // Element bytes are all the kernel moves: one loop per element size.
  template <class F>
  static void by_elem_size(size_t es, F&& f) {
    switch (es) {
      case 1: return f(uint8_t{});
      case 4: return f(uint32_t{});
      default: return f(uint64_t{});
    }
  }
};

std::unique_ptr<Kernel> masked_fill_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  auto k = std::make_unique<MaskedFillKernel>();
  k->plan = make_bcast_plan(ctx, kc.outputs[0].shape, {ctx.input(0).shape, ctx.input(1).shape});
  const json& v = ctx.attrs().at("value");
  const double d = ctx.attr_float("value");
  const int64_t i = v.is_boolean() || v.is_number_integer() ? ctx.attr_int("value")
                                                            : std::isfinite(d) ? static_cast<int64_t>(d) : 0;
  store_scalar(k->value, kc.outputs[0].dtype, d, i);
  return k;
}

std::unique_ptr<TileOp> masked_fill_tile(const NodeCtx& ctx) {
  if (!tile_operands_ok(ctx) || ctx.input(0).dtype != DType::F32) return nullptr;
  return std::make_unique<MaskedFillTile>(static_cast<float>(ctx.attr_float("value")));
}

// The op code of each Bin (the comparisons' too); the .Scalar forms read
// their other operand from attr `other`, pow's from `exponent`.
Pointwise bin_pointwise(Bin op, bool attr) {
  static constexpr PwCode code[] = {PwCode::Add, PwCode::Sub, PwCode::Mul, PwCode::Div, PwCode::Max,
                                    PwCode::Min, PwCode::Pow, PwCode::Eq,  PwCode::Ne,  PwCode::Lt,
                                    PwCode::Le,  PwCode::Gt,  PwCode::Ge};
  if (op == Bin::Pow && attr) return {PwCode::PowScalar, nullptr};
  return {code[static_cast<int>(op)], attr ? "other" : nullptr};
}

template <Bin OP, bool Attr>
OpDef bin_def(const std::string& name, const std::string& doc) {
  OpDef d{name, doc, &bin_infer<OP, Attr>, &bin_make<OP, Attr>, false, &bin_tile<OP, Attr>, true};
  d.pointwise = bin_pointwise(OP, Attr);
  return d;
}

// op(x, e) == x (the simplify pass): e is input 1, or the attr `attr` (the
// .Scalar forms); commutes: op(e, x) == x too; scale: add/sub's alpha.
OpDef with_identity(OpDef d, double e, const char* attr, bool commutes, const char* scale) {
  d.algebra.identity = e;
  d.algebra.identity_attr = attr;
  d.algebra.commutes = commutes;
  d.algebra.scale_attr = scale;
  return d;
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& r) {
  const std::string bc = "; broadcasts; PyTorch dtype promotion over float32/float64/int64/int32/uint8/bool";
  OpDef add = with_identity(bin_def<Bin::Add, false>(opname::add, "self + alpha * other" + bc + " (bool: or)"), 0, nullptr, true, "alpha");
  add.fuse_role = FuseRole::Add;
  r.add(std::move(add));
  r.add(with_identity(bin_def<Bin::Sub, false>("aten.sub.Tensor", "self - alpha * other" + bc + " (not bool)"), 0, nullptr, false, "alpha"));
  r.add(with_identity(bin_def<Bin::Mul, false>("aten.mul.Tensor", "self * other" + bc + " (bool: and)"), 1, nullptr, true, nullptr));
  r.add(with_identity(bin_def<Bin::Div, false>("aten.div.Tensor", "self / other, true division (int/int -> float32)" + bc), 1, nullptr, false, nullptr));
  r.add(bin_def<Bin::Max, false>("aten.maximum.default", "elementwise max, NaN propagates" + bc));
  r.add(bin_def<Bin::Min, false>("aten.minimum.default", "elementwise min, NaN propagates" + bc));
  r.add(bin_def<Bin::Pow, false>("aten.pow.Tensor_Tensor", "self ** exponent" + bc + " (not bool)"));
  r.add(bin_def<Bin::Pow, true>("aten.pow.Tensor_Scalar", "self ** exponent (attr number); result dtype by promotion with a wrapped scalar"));
  r.add(with_identity(bin_def<Bin::Add, true>("aten.add.Scalar", "self + alpha * other (attr number); promotion as with a wrapped scalar"), 0, "other", false, "alpha"));
  r.add(with_identity(bin_def<Bin::Sub, true>("aten.sub.Scalar", "self - alpha * other (attr number); promotion as with a wrapped scalar"), 0, "other", false, "alpha"));
  r.add(with_identity(bin_def<Bin::Mul, true>("aten.mul.Scalar", "self * other (attr number); promotion as with a wrapped scalar"), 1, "other", false, nullptr));
  r.add(with_identity(bin_def<Bin::Div, true>("aten.div.Scalar", "self / other (attr number), true division; ints -> float32"), 1, "other", false, nullptr));
  const char* cmp[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const char* sym[] = {"==", "!=", "<", "<=", ">", ">="};
  using Inf = std::vector<TensorType> (*)(const NodeCtx&);
  using Mk = std::unique_ptr<Kernel> (*)(const KernelCtx&);
  const Inf ti[] = {bin_infer<Bin::Eq, false>, bin_infer<Bin::Ne, false>, bin_infer<Bin::Lt, false>,
                    bin_infer<Bin::Le, false>, bin_infer<Bin::Gt, false>, bin_infer<Bin::Ge, false>};
  const Mk tm[] = {bin_make<Bin::Eq, false>, bin_make<Bin::Ne, false>, bin_make<Bin::Lt, false>,
                   bin_make<Bin::Le, false>, bin_make<Bin::Gt, false>, bin_make<Bin::Ge, false>};
  const Inf si[] = {bin_infer<Bin::Eq, true>, bin_infer<Bin::Ne, true>, bin_infer<Bin::Lt, true>,
                    bin_infer<Bin::Le, true>, bin_infer<Bin::Gt, true>, bin_infer<Bin::Ge, true>};
  const Mk sm[] = {bin_make<Bin::Eq, true>, bin_make<Bin::Ne, true>, bin_make<Bin::Lt, true>,
                   bin_make<Bin::Le, true>, bin_make<Bin::Gt, true>, bin_make<Bin::Ge, true>};
  using Tl = std::unique_ptr<TileOp> (*)(const NodeCtx&);
  const Tl tt[] = {bin_tile<Bin::Eq, false>, bin_tile<Bin::Ne, false>, bin_tile<Bin::Lt, false>,
                   bin_tile<Bin::Le, false>, bin_tile<Bin::Gt, false>, bin_tile<Bin::Ge, false>};
  const Tl st[] = {bin_tile<Bin::Eq, true>, bin_tile<Bin::Ne, true>, bin_tile<Bin::Lt, true>,
                   bin_tile<Bin::Le, true>, bin_tile<Bin::Gt, true>, bin_tile<Bin::Ge, true>};
  const Bin bin[] = {Bin::Eq, Bin::Ne, Bin::Lt, Bin::Le, Bin::Gt, Bin::Ge};
  for (int i = 0; i < 6; ++i) {
    OpDef tensor{std::string("aten.") + cmp[i] + ".Tensor",
                 std::string("self ") + sym[i] + " other -> bool; broadcasts; compared in the promoted dtype",
                 ti[i], tm[i], false, tt[i], true};
    tensor.pointwise = bin_pointwise(bin[i], false);
    r.add(std::move(tensor));
    OpDef scalar{std::string("aten.") + cmp[i] + ".Scalar",
                 std::string("self ") + sym[i] + " other (attr number) -> bool; compared in the promoted dtype",
                 si[i], sm[i], false, st[i], true};
    scalar.pointwise = bin_pointwise(bin[i], true);
    if (cmp[i] == std::string("le")) scalar.fuse_role = FuseRole::LeScalar;  // relu's backward mask
    r.add(std::move(scalar));
  }
  OpDef where{"aten.where.self",
              "condition ? self : other; condition bool; 3-way broadcast; promotion over self/other; "
              "a bfloat16 result selects bfloat16 bits (a one-element float operand rounded once)",
              &where_infer, &where_make, false, &where_tile, true};
  where.bf16 = Bf16::Native;  // where_make: bit selection, or the float32 twin
  where.fuse_role = FuseRole::Where;
  where.pointwise = {PwCode::Where};
  r.add(std::move(where));
  OpDef masked_fill{"aten.masked_fill.Scalar",
                    "mask ? attr value : self; mask bool; self and mask broadcast; self's dtype",
                    &masked_fill_infer, &masked_fill_make, false, &masked_fill_tile, true};
  masked_fill.pointwise = {PwCode::MaskedFill, "value"};
  r.add(std::move(masked_fill));
}

}  // namespace ts

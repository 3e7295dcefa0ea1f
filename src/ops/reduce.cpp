// Reductions: sum, mean, amax, amin over a dim list, and argmax.
//
// Accumulation: float32 sums accumulate in double (8 independent lanes so the
// loop vectorises) and round once at the end. That is at least as accurate as
// PyTorch's cascade summation, so results agree with it to ~1 ulp of the true
// sum (well within 1e-6 relative unless the sum cancels). float64 sums use
// double lanes, int/bool sums int64.
//
// Layout: reduced and kept dims are merged where adjacent, giving the common
// forms [O, R] (reduce contiguous rows) and [O, R, I] (reduce a middle dim,
// vectorised across I); any other pattern takes a general strided path.
#include <cmath>
#include <limits>

#include "ops/block_sums.h"
#include "ops/reduce.h"
#include "trainstep/bfloat16.h"

#include "ops/bf16_kernel.h"
#include "ops/broadcast.h"
#include "ops/layout.h"

namespace ts {

namespace {

constexpr int kLanes = 8;
constexpr int64_t kColBlock = 64;

}  // namespace

std::vector<bool> reduced_dims(const NodeCtx& ctx, const Shape& in) {
  std::vector<bool> red(in.size(), false);
  std::vector<int64_t> dims;
  if (ctx.has_attr("dim")) dims = ctx.attr_ints("dim");
  if (dims.empty()) {
    red.assign(in.size(), true);
    return red;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(ctx, d, static_cast<int64_t>(in.size()));
    if (in.empty()) continue;
    if (red[w]) ctx.fail("dim " + std::to_string(d) + " appears more than once");
    red[w] = true;
  }
  return red;
}

ReducePlan reduce_plan(const NodeCtx& ctx, const Shape& in, const std::vector<bool>& red) {
  ReducePlan p;
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
  if (shape_numel(in) == 0) {  // every output reduces nothing (sum 0, mean NaN)
    p.O = p.out_numel;
    p.R = 0;
    return p;
  }
  // Match K? R? K? with at most one reduced group.
  int nred = 0;
  for (bool f : fl) nred += f;
  if (nred <= 1) {
    size_t i = 0;
    if (i < fl.size() && !fl[i]) p.O = sz[i++];
    if (i < fl.size() && fl[i]) p.R = sz[i++];
    if (i < fl.size() && !fl[i]) p.I = sz[i++];
    return p;
  }
  if (sz.size() > static_cast<size_t>(kMaxDims)) ctx.fail("too many dims to reduce");
  p.general = true;
  auto st = contiguous_strides(sz);
  for (size_t d = 0; d < sz.size(); ++d) {
    if (fl[d]) {
      p.rshape[p.nr] = sz[d];
      p.rstride[p.nr++] = st[d];
    } else {
      p.kshape[p.nk] = sz[d];
      p.kstride[p.nk++] = st[d];
    }
  }
  return p;
}

ArgmaxPlan argmax_plan(const NodeCtx& ctx, const Shape& s) {
  ArgmaxPlan p;
  p.R = shape_numel(s);
  if (ctx.has_attr("dim") && !s.empty()) {
    int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(s.size()));
    p.O = shape_numel(Shape(s.begin(), s.begin() + d));
    p.R = s[d];
    p.I = shape_numel(Shape(s.begin() + d + 1, s.end()));
  }
  return p;
}

namespace {

template <class T, class A>
struct SumOp {
  static A init() { return A(0); }
  static A step(A a, T x) { return wrap_add(a, static_cast<A>(x)); }
  static A merge(A a, A b) { return wrap_add(a, b); }
};
// A bfloat16 element summed as its float32 value in double: the steps
// SumOp<float, double> takes on the widened tensor, so the same order and
// roundings.
struct Bf16SumOp {
  static double init() { return 0; }
  static double step(double a, uint16_t x) { return a + static_cast<double>(bf16_to_float(x)); }
  static double merge(double a, double b) { return a + b; }
};
template <class T>
struct MaxOp {
  static T init() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  static T step(T a, T x) { return (x > a || x != x) ? x : a; }
  static T merge(T a, T b) { return step(a, b); }
};
template <class T>
struct MinOp {
  static T init() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::max();
  }
  static T step(T a, T x) { return (x < a || x != x) ? x : a; }
  static T merge(T a, T b) { return step(a, b); }
};

// Reduces n contiguous elements with kLanes independent accumulators.
template <class Op, class A, class T>
A reduce_contig(const T* x, int64_t n) {
  A acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = Op::init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = Op::step(acc[l], x[i + l]);
  for (; i < n; ++i) acc[0] = Op::step(acc[0], x[i]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = Op::merge(acc[l], acc[l + w]);
  return acc[0];
}

template <class Op, class A, class T, class OutT, class Fin>
void reduce_run(const ReducePlan& p, const T* in, OutT* out, Fin fin) {
  const int64_t total = p.out_numel * (p.general ? 1 : p.R);
  if (p.general) {
    parallel_for(p.out_numel, p.out_numel * 16 > kParallelMin, [&](int64_t o) {
      int64_t base = 0, rem = o;
      for (int d = p.nk - 1; d >= 0; --d) {
        base += (rem % p.kshape[d]) * p.kstride[d];
        rem /= p.kshape[d];
      }
      int64_t idx[kMaxDims] = {};
      int64_t off = base;
      A acc = Op::init();
      for (;;) {
        acc = Op::step(acc, in[off]);
        int d = p.nr - 1;
        for (; d >= 0; --d) {
          off += p.rstride[d];
          if (++idx[d] < p.rshape[d]) break;
          off -= p.rstride[d] * p.rshape[d];
          idx[d] = 0;
        }
        if (d < 0) break;
      }
      out[o] = fin(acc);
    });
    return;
  }
  const int64_t O = p.O, R = p.R, I = p.I;
  if (I == 1) {
    const int nt = omp_get_max_threads();
    if (O >= nt || total <= kParallelMin) {
      parallel_for(O, total > kParallelMin,
                   [&](int64_t o) { out[o] = fin(reduce_contig<Op, A>(in + o * R, R)); });
    } else {
      // Few long rows: split each row across threads, merge partials in order.
      for (int64_t o = 0; o < O; ++o) {
        A part[256];
        int used = 1;
        parallel_region(true, [&](int t, int nt_) {
          const int n = std::min(nt_, 256);
          if (t < n) {
            int64_t r0, r1;
            split_range(R, t, n, r0, r1);
            part[t] = reduce_contig<Op, A>(in + o * R + r0, r1 - r0);
          }
          if (t == 0) used = n;
        });
        A acc = part[0];
        for (int t = 1; t < used; ++t) acc = Op::merge(acc, part[t]);
        out[o] = fin(acc);
      }
    }
    return;
  }
  const int64_t nb = (I + kColBlock - 1) / kColBlock;
  parallel_for(O * nb, total > kParallelMin, [&](int64_t task) {
    const int64_t o = task / nb, i0 = (task % nb) * kColBlock;
    const int64_t w = std::min(kColBlock, I - i0);
    A acc[kColBlock];
    for (int64_t j = 0; j < w; ++j) acc[j] = Op::init();
    for (int64_t r = 0; r < R; ++r) {
      const T* x = in + (o * R + r) * I + i0;
      for (int64_t j = 0; j < w; ++j) acc[j] = Op::step(acc[j], x[j]);
    }
    for (int64_t j = 0; j < w; ++j) out[o * I + i0 + j] = fin(acc[j]);
  });
}

enum class Red { Sum, Mean, Max, Min };

Shape reduced_shape(const Shape& in, const std::vector<bool>& red, bool keepdim) {
  Shape s;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!red[d]) s.push_back(in[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

bool keepdim_attr(const NodeCtx& ctx) { return ctx.has_attr("keepdim") && ctx.attr_bool("keepdim"); }

// Output dtype of each reduction.
DType red_out_dtype(const NodeCtx& ctx, Red op, DType in) {
  if (op == Red::Max || op == Red::Min) return in;
  auto dt = ctx.attr_dtype("dtype");
  if (op == Red::Mean) {
    DType r = dt.value_or(in);
    if (!dtype_is_float(r))
      ctx.fail(std::string("mean needs a float input or dtype, got ") + dtype_name(r));
    return r;
  }
  if (dt) return *dt;
  return dtype_is_float(in) ? in : DType::I64;
}

template <Red OP>
std::vector<TensorType> red_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const TensorType& t = ctx.input(0);
  auto red = reduced_dims(ctx, t.shape);
  return {{red_out_dtype(ctx, OP, t.dtype), reduced_shape(t.shape, red, keepdim_attr(ctx))}};
}

struct RedKernel : Kernel {
  Red op;
  ReducePlan plan;
  DType ct, out_dt;
  int64_t count = 1;
  CastSlot slot;
  Buffer out_scratch;

  template <class T>
  void run_typed(const T* x, void* o) {
    if constexpr (std::is_same_v<T, bool>) {
      return;  // bool computes in int64 (sum) or is not allowed
    } else if (op == Red::Max) {
      reduce_run<MaxOp<T>, T>(plan, x, static_cast<T*>(o), [](T a) { return a; });
    } else if (op == Red::Min) {
      reduce_run<MinOp<T>, T>(plan, x, static_cast<T*>(o), [](T a) { return a; });
    } else if constexpr (std::is_floating_point_v<T>) {
      const double n = static_cast<double>(count);
      if (op == Red::Mean)
        reduce_run<SumOp<T, double>, double>(plan, x, static_cast<T*>(o),
                                             [n](double a) { return static_cast<T>(a / n); });
      else
        reduce_run<SumOp<T, double>, double>(plan, x, static_cast<T*>(o),
                                             [](double a) { return static_cast<T>(a); });
    } else {
      reduce_run<SumOp<T, int64_t>, int64_t>(plan, x, static_cast<T*>(o),
                                            [](int64_t a) { return static_cast<T>(a); });
    }
  }

  // sum/mean of bfloat16 (Bf16::Native), read in place: the double sum
  // rounded as the float32 twin between conversions rounds it (double ->
  // float32 -> bfloat16 for a bfloat16 result, double -> float32 for a
  // float32 one, none for float64).
  bool bf16_in = false;
  void run_bf16(const uint16_t* x, void* o) const {
    const double n = static_cast<double>(count);
    const bool mean = op == Red::Mean;
    if (out_dt == DType::BF16)
      reduce_run<Bf16SumOp, double>(plan, x, static_cast<uint16_t*>(o), [n, mean](double a) {
        return float_to_bf16(static_cast<float>(mean ? a / n : a));
      });
    else if (out_dt == DType::F32)
      reduce_run<Bf16SumOp, double>(plan, x, static_cast<float*>(o),
                                    [n, mean](double a) { return static_cast<float>(mean ? a / n : a); });
    else
      reduce_run<Bf16SumOp, double>(plan, x, static_cast<double*>(o),
                                    [n, mean](double a) { return mean ? a / n : a; });
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (bf16_in) return run_bf16(in[0].as<uint16_t>(), out[0].data);
    const void* x = slot.get(in[0], ct);
    void* o = out_dt == ct ? out[0].data : out_scratch.data();
    dispatch_dtype(ct, [&](auto tag) {
      using T = decltype(tag);
      run_typed(static_cast<const T*>(x), o);
    });
    if (o != out[0].data) cast_buffer(o, ct, out[0].data, out_dt, plan.out_numel);
  }
};

template <Red OP>
std::unique_ptr<Kernel> red_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  const TensorType& t = ctx.input(0);
  // bfloat16 reaches here only for the Native sum/mean ops. A bfloat16
  // input with a float result is read in place (run_bf16); anything else
  // touching bfloat16 (an integer dtype attr, a bfloat16 dtype attr on
  // another input) takes the float32 twin, whose conversions are the
  // reference.
  const DType out_dt = kc.outputs[0].dtype;
  const bool bf16_in = t.dtype == DType::BF16;
  const bool float_out = out_dt == DType::BF16 || out_dt == DType::F32 || out_dt == DType::F64;
  if (bf16_in ? !float_out : out_dt == DType::BF16) {
    const OpDef* def = OpRegistry::get().find(ctx.op());
    if (!def) ctx.fail("op is not registered");
    return make_via_float32(*def, kc);
  }
  auto k = std::make_unique<RedKernel>();
  k->op = OP;
  auto red = reduced_dims(ctx, t.shape);
  k->plan = reduce_plan(ctx, t.shape, red);
  k->out_dt = out_dt;
  k->count = k->plan.out_numel ? t.numel() / k->plan.out_numel : 0;
  if (bf16_in) {
    if (OP == Red::Max || OP == Red::Min) ctx.fail("amax/amin run bfloat16 through float32");
    k->bf16_in = true;
    return k;
  }
  // sum/mean compute in the output dtype (int32/uint8 via int64); amax/amin
  // in the input dtype (bool via uint8, which orders the same way).
  if (OP == Red::Max || OP == Red::Min)
    k->ct = t.dtype == DType::Bool ? DType::U8 : t.dtype;
  else
    k->ct = compute_dtype(k->out_dt);
  k->slot.prepare(t, k->ct);
  if (k->out_dt != k->ct) k->out_scratch = Buffer(static_cast<size_t>(k->plan.out_numel) * 8);
  return k;
}

// ---- mean.dim over a channel-blocked input ----
// The spatial mean of a rank-4 activation (global average pooling) reads it
// in oneDNN's channel-blocked layout when plan_layouts chose that layout for
// the convolutions before it, so their outputs need no reorder to plain.

// dim names the last two dims of a rank-4 tensor, in any order or sign,
// and the result stays float32 (no dtype, or float32).
bool spatial_dims(const json& attrs) {
  auto dt = attrs.find("dtype");
  if (dt != attrs.end() && !dt->is_null() && *dt != "float32") return false;
  auto it = attrs.find("dim");
  if (it == attrs.end() || !it->is_array() || it->size() != 2) return false;
  bool seen[4] = {};
  for (const json& d : *it) {
    if (!d.is_number_integer()) return false;
    int64_t v = d.get<int64_t>();
    if (v < 0) v += 4;
    if (v != 2 && v != 3) return false;
    seen[v] = true;
  }
  return seen[2] && seen[3];
}

std::vector<TensorType> mean_dim_infer(const NodeCtx& ctx) {
  std::vector<TensorType> out = red_infer<Red::Mean>(ctx);
  check_layout_ports(ctx, {0}, {});
  if (port_layout(ctx, false, 0, ctx.input(0)) != Layout::Plain &&
      (!spatial_dims(ctx.attrs()) || out[0].dtype != DType::F32))
    ctx.fail("a channel-blocked input needs dim [2, 3] (a spatial mean) and a float32 result");
  return out;
}

// Per (sample, channel block): each lane's S = H * W values summed in
// double in order (the plain kernel interleaves 8 partial sums, so the two
// agree to rounding), then divided by S.
struct BlockedMeanKernel : Kernel {
  int64_t pairs = 0, S = 0;
  int B = 8;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    static constexpr double kNoShift[16] = {};
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();  // [N, C(, 1, 1)]: sample n, channel cb * B + l at p * B + l
    const int64_t s = S;
    const int b = B;
    parallel_for(pairs, pairs * s * b > kParallelMin, [&](int64_t p) {
      double s1[16], s2[16];
      block_lane_sums(b, x + p * s * b, nullptr, kNoShift, s, s1, s2);
      for (int l = 0; l < b; ++l) y[p * b + l] = static_cast<float>(s1[l] / static_cast<double>(s));
    });
  }
};

std::unique_ptr<Kernel> mean_dim_make(const KernelCtx& kc) {
  const TensorType& t = kc.node.input(0);
  const int64_t block = layout_block(port_layout(kc.node, false, 0, t));
  if (block == 1) return red_make<Red::Mean>(kc);
  // The blocked kernel reads float32: a bfloat16 input goes through its
  // float32 twin (widening keeps the blocked order).
  if (t.dtype == DType::BF16) {
    const OpDef* def = OpRegistry::get().find(kc.node.op());
    if (!def) kc.node.fail("op is not registered");
    return make_via_float32(*def, kc);
  }
  auto k = std::make_unique<BlockedMeanKernel>();
  k->B = static_cast<int>(block);
  k->pairs = t.shape[0] * (t.shape[1] / block);
  k->S = t.shape[2] * t.shape[3];
  return k;
}

// ---- argmax ----
std::vector<TensorType> argmax_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  const TensorType& t = ctx.input(0);
  if (t.dtype == DType::Bool) ctx.fail("argmax is not supported for bool tensors");
  if (t.numel() == 0) ctx.fail("argmax of an empty tensor");
  if (!ctx.has_attr("dim")) {
    Shape s = keepdim_attr(ctx) ? Shape(t.shape.size(), 1) : Shape{};
    return {{DType::I64, s}};
  }
  std::vector<bool> red(t.shape.size(), false);
  int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(t.shape.size()));
  if (!t.shape.empty()) red[d] = true;
  return {{DType::I64, reduced_shape(t.shape, red, keepdim_attr(ctx))}};
}

struct ArgmaxKernel : Kernel {
  int64_t O, R, I;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    int64_t* o = out[0].as<int64_t>();
    dispatch_dtype(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in[0].as<T>();
      const int64_t O_ = O, R_ = R, I_ = I;
      parallel_for(O_ * I_, O_ * R_ * I_ > kParallelMin, [&](int64_t oi) {
        const int64_t ob = oi / I_, i = oi % I_;
        const T* p = x + ob * R_ * I_ + i;
        T best = p[0];
        int64_t bi = 0;
        // First maximum wins; a NaN counts as the maximum (as in PyTorch).
        if (!(best != best)) {
          for (int64_t r = 1; r < R_; ++r) {
            const T v = p[r * I_];
            if (v != v) {
              bi = r;
              break;
            }
            if (v > best) {
              best = v;
              bi = r;
            }
          }
        }
        o[oi] = bi;
      });
    });
  }
};

std::unique_ptr<Kernel> argmax_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  auto k = std::make_unique<ArgmaxKernel>();
  const ArgmaxPlan p = argmax_plan(ctx, ctx.input(0).shape);
  k->O = p.O, k->R = p.R, k->I = p.I;
  return k;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  // bfloat16 (Native): read in place, summed in double, rounded as the
  // float32 twin would round it (RedKernel::run_bf16).
  OpDef sum_dim{opname::sum_dim,
                "sum over attr dim (null/empty = all), keepdim, dtype; float32 and bfloat16 accumulate in double "
                "(bfloat16 rounded via float32); bool/int -> int64",
                &red_infer<Red::Sum>, &red_make<Red::Sum>, false};
  sum_dim.bf16 = Bf16::Native;
  r.add(std::move(sum_dim));
  r.add(OpDef{opname::sum, "sum of all elements (attr dtype); float32 accumulates in double; bool/int -> int64",
              &red_infer<Red::Sum>, &red_make<Red::Sum>, false});
  r.add(OpDef{opname::mean, "mean of all elements (attr dtype); float32/float64 only",
              &red_infer<Red::Mean>, &red_make<Red::Mean>, false});
  OpDef mean_dim{opname::mean_dim,
                 "mean over attr dim (null/empty = all), keepdim, dtype; float32/float64, and bfloat16 "
                 "summed in double, rounded via float32; over dim [2, 3] the input may be channel-blocked "
                 "(plan_layouts; bfloat16 then through float32)",
                 &mean_dim_infer, &mean_dim_make, false};
  mean_dim.bf16 = Bf16::Native;
  mean_dim.layouts = LayoutCaps{{in_port(0)}, {}, &spatial_dims};
  r.add(std::move(mean_dim));
  r.add(OpDef{opname::amax, "max over attr dim (empty = all), keepdim; NaN propagates; any dtype",
              &red_infer<Red::Max>, &red_make<Red::Max>, false});
  r.add(OpDef{opname::amin, "min over attr dim (empty = all), keepdim; NaN propagates; any dtype",
              &red_infer<Red::Min>, &red_make<Red::Min>, false});
  r.add(OpDef{opname::argmax,
              "index of the first max along attr dim (null = flattened), keepdim -> int64; NaN counts as max; not bool",
              &argmax_infer, &argmax_make, false});
}

}  // namespace ts

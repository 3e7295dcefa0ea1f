// softmax and log_softmax along one dim, and their backward, each in one
// kernel (torch._decomp would make five passes: amax, sub, exp, sum, div).
//
// The tensor is viewed as [O, R, I] with R the softmax dim. Each of the O*I
// lines of R elements (stride I) is independent: max, then exp(x - max)
// summed in double; softmax = e / sum, log_softmax = (x - max) - log(sum).
// Backward, with y the forward output and g the incoming gradient:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
// bfloat16 (Bf16::Native): the float32 arithmetic on the widened line, the
// result rounded once (as torch's CPU kernels), but for log_softmax along
// the last dim, whose log(sum) torch rounds too (log_sum_bf16). Contiguous forward lines
// widen and round inside their own passes (fwd_line_bf16); other lines are
// widened to scratch, run through the float32 routines and rounded.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/bf16_lanes.h"
#include "ops/broadcast.h"
#include "ops/isa_target.h"
#include "ops/parallel.h"
#include "ops/vmath.h"
#include "ops/softmax.h"
#include "trainstep/bfloat16.h"

namespace ts {

SoftmaxLines softmax_lines(const NodeCtx& ctx, const Shape& s) {
  SoftmaxLines l;
  if (s.empty()) return l;
  const int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(s.size()));
  l.O = shape_numel(Shape(s.begin(), s.begin() + d));
  l.R = s[d];
  l.I = shape_numel(Shape(s.begin() + d + 1, s.end()));
  l.last = d + 1 == static_cast<int64_t>(s.size());
  return l;
}

namespace {

using Lines = SoftmaxLines;

void expect_float(const NodeCtx& ctx, int i) {
  if (!dtype_is_float(ctx.input(i).dtype))
    ctx.fail("input " + std::to_string(i) + " must be float32, float64 or bfloat16, got " + ctx.input(i).str());
}

// ---- forward: self; attrs dim, half_to_float ----
std::vector<TensorType> fwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  expect_float(ctx, 0);
  if (ctx.has_attr("half_to_float") && ctx.attr_bool("half_to_float"))
    ctx.fail("half_to_float needs a float16 input");
  softmax_lines(ctx, ctx.input(0).shape);
  return {{ctx.input(0).dtype, ctx.input(0).shape}};
}

// One line of R elements at stride I; the float32 and bfloat16 kernels
// share these, so a bfloat16 line (widened to float32, contiguous) gets the
// arithmetic its float32 twin would.

// The sum of a line's exp values in double over vector lanes. One
// out-of-line function for the float32 and bfloat16 lines, so both add in
// the same order and round alike.
__attribute__((noinline)) double exp_sum(const float* e, int64_t R) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t r = 0; r < R; ++r) sum += e[r];
  return sum;
}

// A contiguous float32 line, vectorised: the max, exp through the vector
// math, and the sum in double over vector lanes. A NaN element needs no test
// of its own: it makes the sum NaN, so every output is NaN, as the scalar
// scan's NaN max gives. ys must not alias xs.
template <bool Log>
void fwd_line_vec(const float* xs, float* ys, int64_t R) {
  float mv = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mv)
  for (int64_t r = 0; r < R; ++r) mv = xs[r] > mv ? xs[r] : mv;
  const float m = mv;
  for (int64_t r = 0; r < R; ++r) ys[r] = xs[r] - m;
  vexp(ys, ys, R);
  const double sum = exp_sum(ys, R);
  if (Log) {
    const float ls = static_cast<float>(std::log(sum));
    for (int64_t r = 0; r < R; ++r) ys[r] = (xs[r] - m) - ls;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t r = 0; r < R; ++r) ys[r] *= inv;
  }
}

// ---- contiguous bfloat16 lines, conversions folded into the passes ----
// The last pass of a line computes each float32 result and rounds it to
// bfloat16 as it stores (softmax: e * inv; log_softmax: (x - m) - ls), on W
// lanes (bf16_lanes.h) compiled per ISA level; the scalar level uses
// float_to_bf16 itself. Same bits as bf16_round_bits.
// y = round(e * s), W lanes at a time, the tail scalar.
template <int W>
TS_INLINE void scale_round(const float* e, float s, uint16_t* y, int64_t R) {
  int64_t r = 0;
  for (; r + W <= R; r += W) {
    typename BfLanes<W>::f v;
    std::memcpy(&v, e + r, sizeof v);
    v = v * s;
    store_bf16<W>(y + r, v);
  }
  for (; r < R; ++r) y[r] = float_to_bf16(e[r] * s);
}

// y = round((x - m) - ls), x bfloat16.
template <int W>
TS_INLINE void shift_round(const uint16_t* x, float m, float ls, uint16_t* y, int64_t R) {
  int64_t r = 0;
  for (; r + W <= R; r += W) {
    typename BfLanes<W>::f v;
    load_bf16<W>(x + r, v);
    v = (v - m) - ls;
    store_bf16<W>(y + r, v);
  }
  for (; r < R; ++r) y[r] = float_to_bf16((bf16_to_float(x[r]) - m) - ls);
}

#if TS_X86
TS_AVX512 void scale_round16(const float* e, float s, uint16_t* y, int64_t R) { scale_round<16>(e, s, y, R); }
TS_AVX2 void scale_round8(const float* e, float s, uint16_t* y, int64_t R) { scale_round<8>(e, s, y, R); }
TS_AVX512 void shift_round16(const uint16_t* x, float m, float ls, uint16_t* y, int64_t R) {
  shift_round<16>(x, m, ls, y, R);
}
TS_AVX2 void shift_round8(const uint16_t* x, float m, float ls, uint16_t* y, int64_t R) {
  shift_round<8>(x, m, ls, y, R);
}
#endif

void scale_round_isa(const float* e, float s, uint16_t* y, int64_t R) {
#if TS_X86
  switch (cpu_isa()) {
    case CpuIsa::Avx512: return scale_round16(e, s, y, R);
    case CpuIsa::Avx2: return scale_round8(e, s, y, R);
    case CpuIsa::Scalar: break;
  }
#endif
  for (int64_t r = 0; r < R; ++r) y[r] = float_to_bf16(e[r] * s);
}

void shift_round_isa(const uint16_t* x, float m, float ls, uint16_t* y, int64_t R) {
#if TS_X86
  switch (cpu_isa()) {
    case CpuIsa::Avx512: return shift_round16(x, m, ls, y, R);
    case CpuIsa::Avx2: return shift_round8(x, m, ls, y, R);
    case CpuIsa::Scalar: break;
  }
#endif
  for (int64_t r = 0; r < R; ++r) y[r] = float_to_bf16((bf16_to_float(x[r]) - m) - ls);
}

// log(sum) as torch's bfloat16 log_softmax over the last dim has it: its
// kernel keeps the sum and its log in bfloat16 arrays, so both are rounded
// (a float32 log(sum) gave 11-14 % of elements an ulp apart from eager's,
// under torch 1.13 and 2.x alike). Lines along other dims round once.
inline float log_sum_bf16(double sum) {
  const float s = bf16_to_float(float_to_bf16(static_cast<float>(sum)));
  return bf16_to_float(float_to_bf16(static_cast<float>(std::log(static_cast<double>(s)))));
}

// fwd_line_vec on a contiguous bfloat16 line, e (R floats) its scratch: the
// max read from bfloat16, x - m widened straight into e, the same vexp and
// exp_sum, and the last pass rounding as it stores. Every float32 value is
// the one fwd_line_vec computes on the widened line (the max is the same
// whatever the order: only +0 against -0 could differ, and with both in a
// line the sum is at least 2, so neither exp(x - m) nor (x - m) - log(sum)
// sees the sign).
template <bool Log>
void fwd_line_bf16(const uint16_t* xs, uint16_t* ys, float* e, int64_t R, bool last) {
  float mv = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mv)
  for (int64_t r = 0; r < R; ++r) {
    const float v = bf16_to_float(xs[r]);
    mv = v > mv ? v : mv;
  }
  const float m = mv;
#pragma omp simd
  for (int64_t r = 0; r < R; ++r) e[r] = bf16_to_float(xs[r]) - m;
  vexp(e, e, R);
  const double sum = exp_sum(e, R);
  if (Log) shift_round_isa(xs, m, last ? log_sum_bf16(sum) : static_cast<float>(std::log(sum)), ys, R);
  else scale_round_isa(e, static_cast<float>(1.0 / sum), ys, R);
}

template <bool Log, class T>
void fwd_line_scalar(const T* xs, T* ys, int64_t R, int64_t I) {
  double sum = 0;
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < R; ++r) m = (xs[r * I] > m || xs[r * I] != xs[r * I]) ? xs[r * I] : m;
  if (Log) {
    for (int64_t r = 0; r < R; ++r) sum += std::exp(xs[r * I] - m);
    // (x - max) first: exact for nearby values, so large logits lose
    // nothing to rounding max + log(sum) at their magnitude (as PyTorch).
    const T ls = static_cast<T>(std::log(sum));
    for (int64_t r = 0; r < R; ++r) ys[r * I] = (xs[r * I] - m) - ls;
  } else {
    for (int64_t r = 0; r < R; ++r) {
      const T e = std::exp(xs[r * I] - m);
      ys[r * I] = e;
      sum += e;
    }
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t r = 0; r < R; ++r) ys[r * I] *= inv;
  }
}

// The float32 kernel's choice for a tensor whose lines have stride I, run on
// one line: contiguous lines take the vector form.
template <bool Log, class T>
void fwd_line(const T* xs, T* ys, int64_t R, int64_t I, bool contiguous) {
  if constexpr (std::is_same_v<T, float>) {
    if (contiguous) return fwd_line_vec<Log>(xs, ys, R);
  }
  fwd_line_scalar<Log>(xs, ys, R, I);
}

// Backward line; ds must not alias gs or ys.
template <bool Log, class T>
void bwd_line(const T* gs, const T* ys, T* ds, int64_t R, int64_t I, bool contiguous) {
  double s = 0;
  if (Log) {
#pragma omp simd reduction(+ : s)
    for (int64_t r = 0; r < R; ++r) s += gs[r * I];
    const T st = static_cast<T>(s);
    if constexpr (std::is_same_v<T, float>) {
      if (contiguous) {
        vexp(ys, ds, R);
        for (int64_t r = 0; r < R; ++r) ds[r] = gs[r] - ds[r] * st;
        return;
      }
    }
    for (int64_t r = 0; r < R; ++r) ds[r * I] = gs[r * I] - std::exp(ys[r * I]) * st;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t r = 0; r < R; ++r) s += static_cast<double>(gs[r * I]) * ys[r * I];
    const T st = static_cast<T>(s);
    for (int64_t r = 0; r < R; ++r) ds[r * I] = ys[r * I] * (gs[r * I] - st);
  }
}

// bfloat16 lines (torch's CPU kernels for bfloat16 without half_to_float):
// each line widened to float32 in per-thread scratch, the float32 line
// routine run on it, and the result rounded to bfloat16 once. The scratch
// (nin + 1 lines of R floats per thread) is sized at construction.
struct Bf16Lines {
  Lines l;
  int nthr = 1;
  int nin = 1;
  Buffer scratch;

  void init(const KernelCtx& kc, int inputs) {
    l = softmax_lines(kc.node, kc.node.input(0).shape);
    nthr = kc.threads > 0 ? kc.threads : omp_get_max_threads();
    nin = inputs;
    scratch = Buffer(static_cast<size_t>(nthr) * (nin + 1) * std::max<int64_t>(l.R, 1) * sizeof(float));
  }

  static void widen(const uint16_t* src, float* dst, int64_t R, int64_t I) {
    if (I == 1) bf16_to_floats(src, dst, R);
    else
      for (int64_t r = 0; r < R; ++r) dst[r] = bf16_to_float(src[r * I]);
  }
  static void narrow(const float* src, uint16_t* dst, int64_t R, int64_t I) {
    if (I == 1) floats_to_bf16(src, dst, R);
    else
      for (int64_t r = 0; r < R; ++r) dst[r * I] = float_to_bf16(src[r]);
  }

  // f(in lines, out line) on each line, in[k] widened, out rounded back.
  template <class F>
  void run(const Tensor* in, Tensor& out, F&& f) const {
    const int64_t R = l.R, I = l.I, lines = l.O * I;
    uint16_t* y = out.as<uint16_t>();
    parallel_region(l.O * R * I > kParallelMin, [&](int t, int nt) {
      float* buf = static_cast<float*>(scratch.data()) + static_cast<int64_t>(t) * (nin + 1) * R;
      const float* ins[2] = {buf, buf + R};  // the widened inputs (nin of them)
      float* o = buf + nin * R;
      int64_t b, e;
      split_range(lines, t, nt, b, e);
      for (int64_t line = b; line < e; ++line) {
        const int64_t base = (line / I) * R * I + line % I;
        for (int k = 0; k < nin; ++k) widen(in[k].as<uint16_t>() + base, buf + k * R, R, I);
        f(ins, o);
        narrow(o, y + base, R, I);
      }
    }, nthr);
  }
};

template <bool Log>
struct FwdKernel : Kernel {
  Lines l;
  template <class T>
  void run_typed(const T* x, T* y) const {
    const int64_t R = l.R, I = l.I;
    parallel_for(l.O * I, l.O * R * I > kParallelMin, [&](int64_t line) {
      const int64_t base = (line / I) * R * I + line % I;
      fwd_line<Log>(x + base, y + base, R, I, I == 1);
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) run_typed(in[0].as<double>(), out[0].as<double>());
    else run_typed(in[0].as<float>(), out[0].as<float>());
  }
};

template <bool Log>
struct FwdBf16Kernel : Kernel {
  Bf16Lines b;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t R = b.l.R;
    if (b.l.I == 1) return run_contiguous(in[0].as<uint16_t>(), out[0].as<uint16_t>());
    // Strided lines: widened to scratch, the scalar line routine, rounded.
    b.run(in, out[0], [&](const float* const* x, float* y) { fwd_line<Log, float>(x[0], y, R, 1, false); });
  }
  // Contiguous lines read and write bfloat16 directly, one scratch line
  // (exp values) per thread.
  void run_contiguous(const uint16_t* x, uint16_t* y) const {
    const int64_t R = b.l.R, lines = b.l.O;
    parallel_region(lines * R > kParallelMin, [&](int t, int nt) {
      float* e = static_cast<float*>(b.scratch.data()) + static_cast<int64_t>(t) * (b.nin + 1) * R;
      int64_t lb, le;
      split_range(lines, t, nt, lb, le);
      for (int64_t line = lb; line < le; ++line) fwd_line_bf16<Log>(x + line * R, y + line * R, e, R, b.l.last);
    }, b.nthr);
  }
};

template <bool Log>
std::unique_ptr<Kernel> fwd_make(const KernelCtx& kc) {
  if (kc.node.input(0).dtype == DType::BF16) {
    auto k = std::make_unique<FwdBf16Kernel<Log>>();
    k->b.init(kc, 1);
    return k;
  }
  auto k = std::make_unique<FwdKernel<Log>>();
  k->l = softmax_lines(kc.node, kc.node.input(0).shape);
  return k;
}

// ---- backward: grad_output, output; attrs dim, input_dtype ----
std::vector<TensorType> bwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  expect_float(ctx, 0);
  if (ctx.input(1).dtype != ctx.input(0).dtype || ctx.input(1).shape != ctx.input(0).shape)
    ctx.fail("output " + ctx.input(1).str() + " must match grad_output " + ctx.input(0).str());
  auto dt = ctx.attr_dtype("input_dtype");
  // input_dtype bfloat16 with float32 gradients (autocast): torch's CPU
  // kernel computes and returns float32, which the exporter's real-tensor
  // trace records (its meta function and decomposition would cast to
  // bfloat16; the eager kernel is the reference).
  const bool bf16_input = dt == DType::BF16 && ctx.input(0).dtype == DType::F32;
  if (dt && *dt != ctx.input(0).dtype && !bf16_input)
    ctx.fail(std::string("input_dtype ") + dtype_name(*dt) + " differs from the gradient's " +
             dtype_name(ctx.input(0).dtype));
  softmax_lines(ctx, ctx.input(0).shape);
  return {{ctx.input(0).dtype, ctx.input(0).shape}};
}

template <bool Log>
struct BwdKernel : Kernel {
  Lines l;
  template <class T>
  void run_typed(const T* g, const T* y, T* dx) const {
    const int64_t R = l.R, I = l.I;
    // dx has its own buffer (this op writes over no input).
    parallel_for(l.O * I, l.O * R * I > kParallelMin, [&](int64_t line) {
      const int64_t base = (line / I) * R * I + line % I;
      bwd_line<Log>(g + base, y + base, dx + base, R, I, I == 1);
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) run_typed(in[0].as<double>(), in[1].as<double>(), out[0].as<double>());
    else run_typed(in[0].as<float>(), in[1].as<float>(), out[0].as<float>());
  }
};

template <bool Log>
struct BwdBf16Kernel : Kernel {
  Bf16Lines b;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const int64_t R = b.l.R;
    const bool contiguous = b.l.I == 1;
    b.run(in, out[0], [&](const float* const* x, float* dx) {
      bwd_line<Log, float>(x[0], x[1], dx, R, 1, contiguous);
    });
  }
};

template <bool Log>
std::unique_ptr<Kernel> bwd_make(const KernelCtx& kc) {
  if (kc.node.input(0).dtype == DType::BF16) {
    auto k = std::make_unique<BwdBf16Kernel<Log>>();
    k->b.init(kc, 2);
    return k;
  }
  auto k = std::make_unique<BwdKernel<Log>>();
  k->l = softmax_lines(kc.node, kc.node.input(0).shape);
  return k;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  // bfloat16: each line widened to float32, the float32 arithmetic, one rounding.
  const std::string f = "; float32/float64, sums in double; bfloat16 lines computed in float32, rounded once";
  OpDef sm{opname::softmax, "exp(self - max) / sum(exp(self - max)) along attr dim" + f, &fwd_infer,
           &fwd_make<false>};
  OpDef lsm{opname::log_softmax,
            "self - max - log(sum(exp(self - max))) along attr dim" + f +
                " (along the last dim, log(sum) is rounded to bfloat16 first, as torch's kernel)",
            &fwd_infer,
            &fwd_make<true>};
  OpDef smb{opname::softmax_backward,
            "softmax gradient output * (grad_output - sum(grad_output * output)) along attr dim" + f,
            &bwd_infer, &bwd_make<false>};
  OpDef lsmb{opname::log_softmax_backward,
             "log_softmax gradient grad_output - exp(output) * sum(grad_output) along attr dim" + f,
             &bwd_infer, &bwd_make<true>};
  for (OpDef* d : {&sm, &lsm, &smb, &lsmb}) {
    d->bf16 = Bf16::Native;  // FwdBf16Kernel, BwdBf16Kernel
    r.add(std::move(*d));
  }
}

}  // namespace ts

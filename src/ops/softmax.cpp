// softmax and log_softmax along one dim, and their backward, each in one
// kernel (torch._decomp would make five passes: amax, sub, exp, sum, div).
//
// The tensor is viewed as [O, R, I] with R the softmax dim. Each of the O*I
// lines of R elements (stride I) is independent: max, then exp(x - max)
// summed in double; softmax = e / sum, log_softmax = (x - max) - log(sum).
// Backward, with y the forward output and g the incoming gradient:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
#include <cmath>
#include <limits>

#include "ops/broadcast.h"
#include "ops/vmath.h"
#include "ops/softmax.h"

namespace ts {

SoftmaxLines softmax_lines(const NodeCtx& ctx, const Shape& s) {
  SoftmaxLines l;
  if (s.empty()) return l;
  const int64_t d = wrap_dim(ctx, ctx.attr_int("dim"), static_cast<int64_t>(s.size()));
  l.O = shape_numel(Shape(s.begin(), s.begin() + d));
  l.R = s[d];
  l.I = shape_numel(Shape(s.begin() + d + 1, s.end()));
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

template <bool Log>
struct FwdKernel : Kernel {
  Lines l;
  template <class T>
  void run_typed(const T* x, T* y) const {
    const int64_t R = l.R, I = l.I;
    parallel_for(l.O * I, l.O * R * I > kParallelMin, [&](int64_t line) {
      const int64_t o = line / I, i = line % I;
      const T* xs = x + o * R * I + i;
      T* ys = y + o * R * I + i;
      double sum = 0;
      if constexpr (std::is_same_v<T, float>) {
        if (I == 1) {
          // A contiguous line, vectorised: the max, exp through the vector
          // math, and the sum in double over vector lanes. A NaN element
          // needs no test of its own: it makes the sum NaN, so every output
          // is NaN, as the scalar scan's NaN max gives.
          float mv = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mv)
          for (int64_t r = 0; r < R; ++r) mv = xs[r] > mv ? xs[r] : mv;
          const float m = mv;
          for (int64_t r = 0; r < R; ++r) ys[r] = xs[r] - m;
          vexp(ys, ys, R);
#pragma omp simd reduction(+ : sum)
          for (int64_t r = 0; r < R; ++r) sum += ys[r];
          if (Log) {
            const T ls = static_cast<T>(std::log(sum));
            for (int64_t r = 0; r < R; ++r) ys[r] = (xs[r] - m) - ls;
          } else {
            const T inv = static_cast<T>(1.0 / sum);
            for (int64_t r = 0; r < R; ++r) ys[r] *= inv;
          }
          return;
        }
      }
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
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) run_typed(in[0].as<double>(), out[0].as<double>());
    else run_typed(in[0].as<float>(), out[0].as<float>());
  }
};

template <bool Log>
std::unique_ptr<Kernel> fwd_make(const KernelCtx& kc) {
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
    parallel_for(l.O * I, l.O * R * I > kParallelMin, [&](int64_t line) {
      const int64_t base = (line / I) * R * I + line % I;
      const T* gs = g + base;
      const T* ys = y + base;
      T* ds = dx + base;
      double s = 0;
      if (Log) {
#pragma omp simd reduction(+ : s)
        for (int64_t r = 0; r < R; ++r) s += gs[r * I];
        const T st = static_cast<T>(s);
        if constexpr (std::is_same_v<T, float>) {
          if (I == 1) {  // ds has its own buffer (this op writes over no input)
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
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) run_typed(in[0].as<double>(), in[1].as<double>(), out[0].as<double>());
    else run_typed(in[0].as<float>(), in[1].as<float>(), out[0].as<float>());
  }
};

template <bool Log>
std::unique_ptr<Kernel> bwd_make(const KernelCtx& kc) {
  auto k = std::make_unique<BwdKernel<Log>>();
  k->l = softmax_lines(kc.node, kc.node.input(0).shape);
  return k;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  const std::string f = "; float32/float64, sums in double";
  r.add(OpDef{opname::softmax, "exp(self - max) / sum(exp(self - max)) along attr dim" + f,
              &fwd_infer, &fwd_make<false>});
  r.add(OpDef{opname::log_softmax, "self - max - log(sum(exp(self - max))) along attr dim" + f,
              &fwd_infer, &fwd_make<true>});
  r.add(OpDef{opname::softmax_backward,
              "softmax gradient output * (grad_output - sum(grad_output * output)) along attr dim" + f,
              &bwd_infer, &bwd_make<false>});
  r.add(OpDef{opname::log_softmax_backward,
              "log_softmax gradient grad_output - exp(output) * sum(grad_output) along attr dim" + f,
              &bwd_infer, &bwd_make<true>});
}

}  // namespace ts

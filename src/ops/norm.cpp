// Layer normalisation over the trailing `normalized_shape` dims:
// native_layer_norm (out, mean, rstd) and its backward.
//
// Each row of N = numel(normalized_shape) elements is normalised on its own;
// mean and variance (biased, as PyTorch) accumulate in double, rstd =
// 1/sqrt(var + eps). Rows run in parallel; the weight/bias gradients sum
// over rows per column in double, in row order, then round once. float32 or
// float64; every tensor of a node has the input's dtype, but for torch's
// mixed type: a bfloat16 input with float32 weight and bias (autocast leaves
// a layer norm on a bfloat16 activation so), whose mean, rstd and weight
// and bias gradients are float32 too. bfloat16 runs through float32
// (ViaFloat32), each bfloat16 output rounded once.
#include <algorithm>
#include <cmath>

#include "ops/broadcast.h"
#include "ops/norm.h"

namespace ts {

namespace {

// Rows (M) and row length (N) of input split at normalized_shape; checks
// weight and bias against normalized_shape when present.
struct LnShape {
  int64_t M = 1, N = 1;
  Shape stat;  // mean/rstd shape: leading dims, then 1s
  DType param = DType::F32;  // weight, bias, mean and rstd: the input's, or float32 (mixed)
};

LnShape ln_shape(const NodeCtx& ctx, int in, int w, int b) {
  const TensorType& x = ctx.input(in);
  if (!dtype_is_float(x.dtype))
    ctx.fail("input must be float32, float64 or bfloat16, got " + x.str());
  Shape ns = ctx.attr_ints("normalized_shape");
  const size_t r = x.shape.size(), k = ns.size();
  if (k == 0 || k > r || !std::equal(ns.begin(), ns.end(), x.shape.end() - k))
    ctx.fail("normalized_shape " + shape_str(ns) + " is not the trailing shape of input " + x.str());
  // torch's mixed type: a bfloat16 input with float32 parameters.
  DType param = x.dtype;
  for (int i : {w, b})
    if (i >= 0 && ctx.has_input(i) && x.dtype == DType::BF16 && ctx.input(i).dtype == DType::F32)
      param = DType::F32;
  for (int i : {w, b}) {
    if (i < 0 || !ctx.has_input(i)) continue;
    const TensorType& t = ctx.input(i);
    if (t.dtype != param || t.shape != ns)
      ctx.fail(std::string(i == w ? "weight " : "bias ") + t.str() + " must be " +
               dtype_name(param) + shape_str(ns) + " for input " + x.str());
  }
  LnShape s;
  s.param = param;
  s.N = shape_numel(ns);
  s.M = shape_numel(Shape(x.shape.begin(), x.shape.end() - k));
  s.stat = Shape(x.shape.begin(), x.shape.end() - k);
  s.stat.insert(s.stat.end(), k, 1);
  return s;
}

// N ones, then N zeros: what an absent weight and bias stand for. g * 1 and
// v * 1 + 0 are exact, and loops with no branch on them run in vector lanes.
template <class T>
Buffer identity_affine(int64_t N) {
  Buffer b(static_cast<size_t>(2 * N) * sizeof(T));
  T* p = static_cast<T*>(b.data());
  std::fill_n(p, N, T(1));
  std::fill_n(p + N, N, T(0));
  return b;
}

// ---- forward: inputs input, weight?, bias?; attrs normalized_shape, eps ----
std::vector<TensorType> ln_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  LnShape s = ln_shape(ctx, 0, 1, 2);
  ctx.attr_float("eps");
  return {{ctx.input(0).dtype, ctx.input(0).shape}, {s.param, s.stat}, {s.param, s.stat}};
}

template <class T>
struct LnKernel : Kernel {
  int64_t M, N;
  double eps;
  Buffer unit;  // identity_affine
  void run(const Tensor* in, Tensor* out) override {
    const T* x = in[0].as<T>();
    const T* w = in[1].data ? in[1].as<T>() : static_cast<const T*>(unit.data());
    const T* b = in[2].data ? in[2].as<T>() : static_cast<const T*>(unit.data()) + N;
    T* y = out[0].data ? out[0].as<T>() : nullptr;  // unused outputs are null
    T* mean = out[1].data ? out[1].as<T>() : nullptr;
    T* rstd = out[2].data ? out[2].as<T>() : nullptr;
    const int64_t n = N;
    const double e = eps;
    parallel_for(M, M * N > kParallelMin, [&](int64_t r) {
      const T* xr = x + r * n;
      // The sums run in vector lanes (omp simd): a serial double chain
      // would wait on the add's latency at every element.
      double s = 0, ss = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += xr[i];
      const double mu = s / n;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < n; ++i) {
        const double d = xr[i] - mu;
        ss += d * d;
      }
      const double rs = 1.0 / std::sqrt(ss / n + e);
      const T m = static_cast<T>(mu), q = static_cast<T>(rs);
      if (mean) mean[r] = m;
      if (rstd) rstd[r] = q;
      if (!y) return;
      T* yr = y + r * n;
      const T *wr = w, *br = b;  // locals: the captured ones are re-read through the closure
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * q * wr[i] + br[i];
    });
  }
};

template <class T>
std::unique_ptr<Kernel> ln_make_t(const KernelCtx& kc) {
  LnShape s = ln_shape(kc.node, 0, 1, 2);
  auto k = std::make_unique<LnKernel<T>>();
  k->M = s.M, k->N = s.N;
  k->eps = kc.node.attr_float("eps");
  k->unit = identity_affine<T>(s.N);
  return k;
}

std::unique_ptr<Kernel> ln_make(const KernelCtx& kc) {
  return kc.node.input(0).dtype == DType::F64 ? ln_make_t<double>(kc) : ln_make_t<float>(kc);
}

// ---- backward: inputs grad_out, input, mean, rstd, weight?, bias?;
// attrs normalized_shape, output_mask [input, weight, bias] ----
std::vector<TensorType> ln_bwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(6);
  LnShape s = ln_shape(ctx, 1, 4, 5);
  const TensorType& x = ctx.input(1);
  if (ctx.input(0).dtype != x.dtype || ctx.input(0).shape != x.shape)
    ctx.fail("grad_out " + ctx.input(0).str() + " must match input " + x.str());
  for (int i : {2, 3})
    if (ctx.input(i).dtype != s.param || ctx.input(i).numel() != s.M)
      ctx.fail(std::string(i == 2 ? "mean " : "rstd ") + ctx.input(i).str() + " must hold " +
               std::to_string(s.M) + " " + dtype_name(s.param) + " values");
  auto mask = ctx.attr_bools("output_mask");
  if (mask.size() != 3) ctx.fail("output_mask must have 3 values");
  Shape ns = ctx.attr_ints("normalized_shape");
  return {{x.dtype, x.shape}, {s.param, ns}, {s.param, ns}};
}

template <class T>
struct LnBwdKernel : Kernel {
  int64_t M, N;
  Buffer colsum;  // per-thread partial sums of dy*xhat and dy (double)
  Buffer unit;    // identity_affine
  void run(const Tensor* in, Tensor* out) override {
    const T* dy = in[0].as<T>();
    const T* x = in[1].as<T>();
    const T* mean = in[2].as<T>();
    const T* rstd = in[3].as<T>();
    const T* w = in[4].data ? in[4].as<T>() : static_cast<const T*>(unit.data());
    T* dx = out[0].data ? out[0].as<T>() : nullptr;
    const int64_t n = N, m = M;
    if (dx) {
      parallel_for(m, m * n > kParallelMin, [&](int64_t r) {
        const T* dyr = dy + r * n;
        const T* xr = x + r * n;
        const T* wr = w;  // a local: the captured one is re-read through the closure
        const double mu = mean[r], rs = rstd[r];
        double sg = 0, sgx = 0;  // sum(g), sum(g * xhat), g = dy * w
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t i = 0; i < n; ++i) {
          const double g = static_cast<double>(dyr[i]) * wr[i];
          sg += g;
          sgx += g * (xr[i] - mu) * rs;
        }
        const double a = sg / n, c = sgx / n;
        T* dxr = dx + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          const double g = static_cast<double>(dyr[i]) * wr[i];
          dxr[i] = static_cast<T>(rs * (g - a - (xr[i] - mu) * rs * c));
        }
      });
    }
    T* dw = out[1].data ? out[1].as<T>() : nullptr;
    T* db = out[2].data ? out[2].as<T>() : nullptr;
    if (!dw && !db) return;
    // Columns split across threads; each column sums its rows in order.
    double* acc = static_cast<double*>(colsum.data());
    parallel_region(m * n > kParallelMin, [&](int t, int nt) {
      int64_t c0, c1;
      split_range(n, t, nt, c0, c1);
      double* sw = acc + c0;
      double* sb = acc + n + c0;
      for (int64_t c = c0; c < c1; ++c) sw[c - c0] = sb[c - c0] = 0;
      for (int64_t r = 0; r < m; ++r) {
        const T* dyr = dy + r * n;
        const T* xr = x + r * n;
        const double mu = mean[r], rs = rstd[r];
        for (int64_t c = c0; c < c1; ++c) {
          sw[c - c0] += static_cast<double>(dyr[c]) * ((xr[c] - mu) * rs);
          sb[c - c0] += dyr[c];
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        if (dw) dw[c] = static_cast<T>(sw[c - c0]);
        if (db) db[c] = static_cast<T>(sb[c - c0]);
      }
    });
  }
};

template <class T>
std::unique_ptr<Kernel> ln_bwd_make_t(const KernelCtx& kc) {
  LnShape s = ln_shape(kc.node, 1, 4, 5);
  auto k = std::make_unique<LnBwdKernel<T>>();
  k->M = s.M, k->N = s.N;
  k->colsum = Buffer(static_cast<size_t>(2 * s.N) * sizeof(double));
  k->unit = identity_affine<T>(s.N);
  return k;
}

std::unique_ptr<Kernel> ln_bwd_make(const KernelCtx& kc) {
  return kc.node.input(1).dtype == DType::F64 ? ln_bwd_make_t<double>(kc)
                                               : ln_bwd_make_t<float>(kc);
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  r.add(OpDef{opname::layer_norm,
              "layer norm over the trailing attr normalized_shape dims of float32 or float64 input, optional "
              "weight and bias; outputs out, mean, rstd (rstd = 1/sqrt(biased var + eps)); "
              "statistics in double; bfloat16 through float32, with float32 weight, bias, mean and "
              "rstd (torch's mixed type) or all bfloat16",
              &ln_infer, &ln_make});
  r.add(OpDef{opname::layer_norm_backward,
              "gradients of native_layer_norm w.r.t. input, weight and bias (attr output_mask) "
              "from grad_out, input, mean, rstd, weight?, bias?; float32 or float64, sums in double",
              &ln_bwd_infer, &ln_bwd_make});
}

}  // namespace ts

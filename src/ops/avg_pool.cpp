// 2-D average pooling (fixed windows), adaptive average pooling and adaptive
// max pooling of float32/float64 (N, C, H, W) or (C, H, W), and their
// backward.
//
// A window's rows depend only on its output row and its columns only on its
// output column, so make() tabulates [start, end) per output row and column
// (and avg_pool2d's divisor factors); the kernels loop over windows. Sums
// run in the tensor's type in row-major window order and divide at the end,
// as PyTorch's CPU kernels do. Forward kernels split (plane, output row)
// pairs across threads; backward kernels scatter-add into their own (n, c)
// plane only, so they are race-free and sum in a fixed order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/avg_pool.h"

#include "ops/broadcast.h"
#include "ops/op.h"
#include "ops/parallel.h"

namespace ts {
namespace {

std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

// Window bounds per output row (or column): [lo, hi) clipped to the input;
// span: the window's length counting padding (avg_pool2d's
// count_include_pad divisor).
struct Axis {
  std::vector<int64_t> lo, hi, span;
};

PoolPlanes planes_of(const NodeCtx& ctx, const TensorType& x, const char* what) {
  if (!dtype_is_float(x.dtype))
    ctx.fail(std::string(what) + " must be float32, float64 or bfloat16, got " + x.str());
  const size_t r = x.shape.size();
  if (r != 3 && r != 4) ctx.fail(std::string(what) + " must be rank 3 (C, H, W) or 4 (N, C, H, W), got " + x.str());
  for (size_t i = r - 3; i < r; ++i)
    if (x.shape[i] < 1) ctx.fail(std::string(what) + " must have non-empty C, H and W, got " + x.str());
  if (x.shape[0] < 0) ctx.fail(std::string(what) + " has a negative size: " + x.str());
  PoolPlanes p;
  p.dtype = x.dtype;
  p.H = x.shape[r - 2], p.W = x.shape[r - 1];
  for (size_t i = 0; i + 2 < r; ++i)
    if (__builtin_mul_overflow(p.planes, x.shape[i], &p.planes)) ctx.fail(std::string(what) + " is too large: " + x.str());
  return p;
}

Shape with_hw(const Shape& s, int64_t oh, int64_t ow) {
  Shape o = s;
  o[o.size() - 2] = oh;
  o[o.size() - 1] = ow;
  return o;
}

void check_numel(const NodeCtx& ctx, int64_t planes, int64_t oh, int64_t ow) {
  int64_t n;
  if (__builtin_mul_overflow(planes, oh, &n) || __builtin_mul_overflow(n, ow, &n))
    ctx.fail("output size " + hw(oh, ow) + " is too large");
}

// grad_output must match the forward output exactly.
void expect_grad(const NodeCtx& ctx, const TensorType& go, DType dt, const Shape& out) {
  if (go.dtype != dt || go.shape != out)
    ctx.fail(std::string("grad_output must be ") + dtype_name(dt) + shape_str(out) + ", got " + go.str());
}

// ---------------------------------------------------------------- avg_pool2d

// PyTorch's pooling output size (dilation 1); with ceil_mode the last
// window must start inside the input or the left padding. Values are
// bounded by the checks before it (no overflow for int64 sizes).
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t s, bool ceil_mode) {
  const __int128 num = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) - k + (ceil_mode ? s - 1 : 0);
  __int128 q = num / s;
  if (num % s != 0 && num < 0) --q;  // floor division
  __int128 o = q + 1;
  if (ceil_mode && (o - 1) * s >= static_cast<__int128>(in) + pad) --o;
  return o < 0 ? 0 : o > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                               : static_cast<int64_t>(o);
}

}  // namespace

AvgGeom avg_pool_geom(const NodeCtx& ctx, const TensorType& x) {
  AvgGeom g;
  g.p = planes_of(ctx, x, "input");
  ctx.attr_pair("kernel_size", g.kh, g.kw);
  g.sh = g.kh, g.sw = g.kw;
  ctx.attr_pair("stride", g.sh, g.sw, true);
  ctx.attr_pair("padding", g.ph, g.pw);
  const bool ceil_mode = ctx.attr_bool("ceil_mode");
  g.include_pad = ctx.attr_bool("count_include_pad");
  if (ctx.has_attr("divisor_override")) {
    g.divisor = ctx.attr_int("divisor_override");
    if (g.divisor == 0) ctx.fail("divisor_override must not be zero");
  }
  if (g.kh < 1 || g.kw < 1) ctx.fail("kernel_size must be positive, got " + hw(g.kh, g.kw));
  if (g.sh < 1 || g.sw < 1) ctx.fail("stride must be positive, got " + hw(g.sh, g.sw));
  if (g.ph < 0 || g.pw < 0 || g.ph > g.kh / 2 || g.pw > g.kw / 2)
    ctx.fail("padding must be between 0 and half the kernel size, got padding " + hw(g.ph, g.pw) + " for kernel " +
             hw(g.kh, g.kw));
  g.OH = pooled_size(g.p.H, g.kh, g.ph, g.sh, ceil_mode);
  g.OW = pooled_size(g.p.W, g.kw, g.pw, g.sw, ceil_mode);
  if (g.OH < 1 || g.OW < 1)
    ctx.fail("output size is not positive: input " + x.str() + ", kernel " + hw(g.kh, g.kw) + ", padding " +
             hw(g.ph, g.pw) + " and stride " + hw(g.sh, g.sw) + " give output " + hw(g.OH, g.OW));
  check_numel(ctx, g.p.planes, g.OH, g.OW);
  g.in_shape = x.shape;
  g.out_shape = with_hw(x.shape, g.OH, g.OW);
  return g;
}

namespace {

Axis avg_axis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pad) {
  Axis a;
  a.lo.resize(out), a.hi.resize(out), a.span.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - pad;
    const int64_t end = std::min(start + k, in + pad);
    a.span[o] = end - start;
    a.lo[o] = std::max<int64_t>(start, 0);
    a.hi[o] = std::min(end, in);
  }
  return a;
}

std::vector<TensorType> avg_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  AvgGeom g = avg_pool_geom(ctx, ctx.input(0));
  return {{g.p.dtype, g.out_shape}};
}

std::vector<TensorType> avg_bwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  AvgGeom g = avg_pool_geom(ctx, ctx.input(1));
  expect_grad(ctx, ctx.input(0), g.p.dtype, g.out_shape);
  return {ctx.input(1)};
}

// A window's divisor: the override, or its size with or without padding.
template <class T>
T avg_divisor(const AvgGeom& g, const Axis& ah, const Axis& aw, int64_t oh, int64_t ow) {
  // Products in T: padded spans of hostile kernel sizes would overflow int64.
  if (g.divisor) return static_cast<T>(g.divisor);
  if (g.include_pad) return static_cast<T>(ah.span[oh]) * static_cast<T>(aw.span[ow]);
  return static_cast<T>(ah.hi[oh] - ah.lo[oh]) * static_cast<T>(aw.hi[ow] - aw.lo[ow]);
}

// Averages over the windows [ah.lo, ah.hi) x [aw.lo, aw.hi) of every plane
// (each output cell's window from the two axis tables), or, backward, spreads
// each grad_output cell over its window. div(v, oh, ow) divides a window's
// sum (or its grad) by that window's divisor, in the op's own order. A
// window wholly in the padding (ceil_mode) averages nothing: 0.
template <class T, class Div>
std::unique_ptr<Kernel> window_avg_kernel(const PoolPlanes& pl, int64_t OH, int64_t OW, Axis ah, Axis aw,
                                          bool backward, Div div) {
  const int64_t H = pl.H, W = pl.W, planes = pl.planes;
  const bool par = planes * std::max(H * W, OH * OW) > kParallelMin;
  if (!backward)
    return make_fn_kernel([=](const Tensor* in, Tensor* out) {
      T* y = out[0].as<T>();
      if (!y) return;
      const T* x = in[0].as<T>();
      parallel_for(planes * OH, par, [&](int64_t r) {
        const int64_t p = r / OH, oh = r % OH;
        const T* xp = x + p * H * W;
        T* yr = y + r * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          if (ah.lo[oh] >= ah.hi[oh] || aw.lo[ow] >= aw.hi[ow]) {
            yr[ow] = T(0);
            continue;
          }
          T sum = 0;
          for (int64_t h = ah.lo[oh]; h < ah.hi[oh]; ++h)
            for (int64_t w = aw.lo[ow]; w < aw.hi[ow]; ++w) sum += xp[h * W + w];
          yr[ow] = div(sum, oh, ow);
        }
      });
    });
  return make_fn_kernel([=](const Tensor* in, Tensor* out) {
    T* gi = out[0].as<T>();
    if (!gi) return;
    const T* go = in[0].as<T>();
    parallel_for(planes, par, [&](int64_t p) {
      T* gp = gi + p * H * W;
      std::fill(gp, gp + H * W, T(0));
      const T* gop = go + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          if (ah.lo[oh] >= ah.hi[oh] || aw.lo[ow] >= aw.hi[ow]) continue;
          const T d = div(gop[oh * OW + ow], oh, ow);
          for (int64_t h = ah.lo[oh]; h < ah.hi[oh]; ++h)
            for (int64_t w = aw.lo[ow]; w < aw.hi[ow]; ++w) gp[h * W + w] += d;
        }
    });
  });
}

template <class T>
std::unique_ptr<Kernel> avg_kernel(const AvgGeom& g, bool backward) {
  Axis ah = avg_axis(g.p.H, g.OH, g.kh, g.sh, g.ph), aw = avg_axis(g.p.W, g.OW, g.kw, g.sw, g.pw);
  return window_avg_kernel<T>(g.p, g.OH, g.OW, ah, aw, backward,
                              [g, ah, aw](T v, int64_t oh, int64_t ow) {
                                return v / avg_divisor<T>(g, ah, aw, oh, ow);
                              });
}

template <bool Backward>
std::unique_ptr<Kernel> avg_make(const KernelCtx& k) {
  AvgGeom g = avg_pool_geom(k.node, k.node.input(Backward ? 1 : 0));
  return g.p.dtype == DType::F64 ? avg_kernel<double>(g, Backward) : avg_kernel<float>(g, Backward);
}

// ---------------------------------------------------------------- adaptive

// Output cell o of out over in covers [floor(o * in / out), ceil((o + 1) * in / out)).
Axis adaptive_axis(int64_t in, int64_t out) {
  Axis a;
  a.lo.resize(out), a.hi.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    a.lo[o] = static_cast<int64_t>(static_cast<__int128>(o) * in / out);
    a.hi[o] = static_cast<int64_t>((static_cast<__int128>(o + 1) * in + out - 1) / out);
  }
  return a;
}

}  // namespace

AdaGeom adaptive_pool_geom(const NodeCtx& ctx, const TensorType& x, const Shape* out_hw) {
  AdaGeom g;
  g.p = planes_of(ctx, x, "input");
  if (out_hw) {
    g.OH = (*out_hw)[out_hw->size() - 2], g.OW = (*out_hw)[out_hw->size() - 1];
  } else {
    std::vector<int64_t> os = ctx.attr_ints("output_size");
    if (os.size() != 2) ctx.fail("output_size must have 2 values, got " + std::to_string(os.size()));
    g.OH = os[0], g.OW = os[1];
  }
  if (g.OH < 0 || g.OW < 0) ctx.fail("output size must not be negative, got " + hw(g.OH, g.OW));
  // make() tabulates each output side: bound them (attributes are untrusted).
  constexpr int64_t kMaxSide = int64_t{1} << 24;
  if (g.OH > kMaxSide || g.OW > kMaxSide)
    ctx.fail("output size " + hw(g.OH, g.OW) + " is too large (at most " + std::to_string(kMaxSide) + " a side)");
  check_numel(ctx, g.p.planes, g.OH, g.OW);
  g.in_shape = x.shape;
  g.out_shape = with_hw(x.shape, g.OH, g.OW);
  return g;
}

// The backward ops: grad_output (and indices) shaped like the forward
// output, i.e. self's shape with the last two dims of grad_output.
AdaGeom adaptive_pool_bwd_geom(const NodeCtx& ctx) {
  const TensorType& go = ctx.input(0);
  const TensorType& x = ctx.input(1);
  if (go.shape.size() != x.shape.size())
    ctx.fail("grad_output " + go.str() + " and self " + x.str() + " differ in rank");
  AdaGeom g = adaptive_pool_geom(ctx, x, &go.shape);
  if (g.OH == 0 || g.OW == 0) ctx.fail("grad_output must have non-empty H and W, got " + go.str());
  expect_grad(ctx, go, g.p.dtype, g.out_shape);
  return g;
}

namespace {

std::vector<TensorType> ada_avg_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  AdaGeom g = adaptive_pool_geom(ctx, ctx.input(0), nullptr);
  return {{g.p.dtype, g.out_shape}};
}

std::vector<TensorType> ada_avg_bwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  adaptive_pool_bwd_geom(ctx);
  return {ctx.input(1)};
}

// Divided by the window's height, then its width, as torch's kernel does.
template <class T>
std::unique_ptr<Kernel> ada_avg_kernel(const AdaGeom& g, bool backward) {
  Axis ah = adaptive_axis(g.p.H, g.OH), aw = adaptive_axis(g.p.W, g.OW);
  return window_avg_kernel<T>(g.p, g.OH, g.OW, ah, aw, backward,
                              [ah, aw](T v, int64_t oh, int64_t ow) {
                                return v / static_cast<T>(ah.hi[oh] - ah.lo[oh]) /
                                       static_cast<T>(aw.hi[ow] - aw.lo[ow]);
                              });
}

std::unique_ptr<Kernel> ada_avg_make(const KernelCtx& k) {
  AdaGeom g = adaptive_pool_geom(k.node, k.node.input(0), nullptr);
  return g.p.dtype == DType::F64 ? ada_avg_kernel<double>(g, false) : ada_avg_kernel<float>(g, false);
}

std::unique_ptr<Kernel> ada_avg_bwd_make(const KernelCtx& k) {
  AdaGeom g = adaptive_pool_bwd_geom(k.node);
  return g.p.dtype == DType::F64 ? ada_avg_kernel<double>(g, true) : ada_avg_kernel<float>(g, true);
}

// Adaptive max pooling: values and int64 indices h * W + w in the input
// plane. The first maximum wins (strict >) and a NaN counts as the maximum
// (the last NaN wins), as PyTorch.
std::vector<TensorType> ada_max_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  AdaGeom g = adaptive_pool_geom(ctx, ctx.input(0), nullptr);
  return {{g.p.dtype, g.out_shape}, {DType::I64, g.out_shape}};
}

template <class T>
std::unique_ptr<Kernel> ada_max_kernel(const AdaGeom& g) {
  Axis ah = adaptive_axis(g.p.H, g.OH), aw = adaptive_axis(g.p.W, g.OW);
  const int64_t H = g.p.H, W = g.p.W, OH = g.OH, OW = g.OW, planes = g.p.planes;
  const bool par = planes * H * W > kParallelMin;
  return make_fn_kernel([=](const Tensor* in, Tensor* out) {
    T* y = out[0].as<T>();
    int64_t* idx = out[1].as<int64_t>();
    if (!y && !idx) return;
    const T* x = in[0].as<T>();
    parallel_for(planes * OH, par, [&](int64_t r) {
      const int64_t p = r / OH, oh = r % OH;
      const T* xp = x + p * H * W;
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t best_i = ah.lo[oh] * W + aw.lo[ow];
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t h = ah.lo[oh]; h < ah.hi[oh]; ++h)
          for (int64_t w = aw.lo[ow]; w < aw.hi[ow]; ++w) {
            const T v = xp[h * W + w];
            if (v > best || std::isnan(v)) best = v, best_i = h * W + w;
          }
        if (y) y[r * OW + ow] = best;
        if (idx) idx[r * OW + ow] = best_i;
      }
    });
  });
}

std::unique_ptr<Kernel> ada_max_make(const KernelCtx& k) {
  AdaGeom g = adaptive_pool_geom(k.node, k.node.input(0), nullptr);
  return g.p.dtype == DType::F64 ? ada_max_kernel<double>(g) : ada_max_kernel<float>(g);
}

// Backward: grad_output, self, indices -> grad_output scattered into a
// zeroed self-shaped tensor at the indices.
std::vector<TensorType> ada_max_bwd_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  AdaGeom g = adaptive_pool_bwd_geom(ctx);
  const TensorType& ix = ctx.input(2);
  if (ix.dtype != DType::I64 || ix.shape != g.out_shape)
    ctx.fail("indices must be int64" + shape_str(g.out_shape) + ", got " + ix.str());
  return {ctx.input(1)};
}

template <class T>
std::unique_ptr<Kernel> ada_max_bwd_kernel(const AdaGeom& g, std::string where) {
  const int64_t n_in = g.p.H * g.p.W, n_out = g.OH * g.OW, planes = g.p.planes;
  const bool par = planes * std::max(n_in, n_out) > kParallelMin;
  return make_fn_kernel([=](const Tensor* in, Tensor* out) {
    T* gi = out[0].as<T>();
    if (!gi) return;
    const T* go = in[0].as<T>();
    const int64_t* idx = in[2].as<int64_t>();
    // Indices come from the graph and may be anything: checked before the
    // parallel loop (an exception must not leave an OpenMP region).
    bool ok = true;
    for (int64_t o = 0; o < planes * n_out; ++o) ok &= (idx[o] >= 0) & (idx[o] < n_in);
    if (!ok)
      for (int64_t o = 0; o < planes * n_out; ++o)
        if (idx[o] < 0 || idx[o] >= n_in)
          fail(where + ": index " + std::to_string(idx[o]) + " is out of bounds for an input plane of " +
               std::to_string(n_in) + " elements");
    parallel_for(planes, par, [&](int64_t p) {
      T* gp = gi + p * n_in;
      std::fill(gp, gp + n_in, T(0));
      for (int64_t o = p * n_out; o < (p + 1) * n_out; ++o) gp[idx[o]] += go[o];
    });
  });
}

std::unique_ptr<Kernel> ada_max_bwd_make(const KernelCtx& k) {
  AdaGeom g = adaptive_pool_bwd_geom(k.node);
  std::string where = "node '" + k.node.node() + "' (" + k.node.op() + ")";
  return g.p.dtype == DType::F64 ? ada_max_bwd_kernel<double>(g, where) : ada_max_bwd_kernel<float>(g, where);
}

}  // namespace

void register_avg_pool_ops(OpRegistry& r) {
  const std::string f = " of float32/float64 (N,)C,H,W";
  r.add({opname::avg_pool2d,
         "2-D average pooling" + f + "; stride/padding/ceil_mode/count_include_pad/divisor_override as PyTorch",
         avg_infer, avg_make<false>});
  r.add({opname::avg_pool2d_backward,
         "Gradient of 2-D average pooling: grad_output / divisor added over each window, one thread per (n, c) plane",
         avg_bwd_infer, avg_make<true>});
  r.add({opname::adaptive_avg_pool2d,
         "Adaptive 2-D average pooling" + f + ": cell o averages [floor(o*in/out), ceil((o+1)*in/out))",
         ada_avg_infer, ada_avg_make});
  r.add({opname::adaptive_avg_pool2d_backward,
         "Gradient of adaptive 2-D average pooling, one thread per (n, c) plane", ada_avg_bwd_infer,
         ada_avg_bwd_make});
  r.add({opname::adaptive_max_pool2d,
         "Adaptive 2-D max pooling" + f + " returning values and int64 flat h*W+w indices as PyTorch",
         ada_max_infer, ada_max_make});
  r.add({opname::adaptive_max_pool2d_backward,
         "Gradient of adaptive 2-D max pooling: scatters grad_output at the saved indices into a zeroed "
         "input-shaped tensor",
         ada_max_bwd_infer, ada_max_bwd_make});
}

}  // namespace ts

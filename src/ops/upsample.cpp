// 2-D nearest and bilinear upsampling of (N, C, H, W) float32/float64, and
// their backward, in both overloads torch emits: `.vec` (output_size or
// scale_factors; torch 1.13) and `.default` (output_size plus optional
// per-axis scales; torch 2.x).
//
// Every output row and column reads from source rows/columns that depend
// only on the sizes and scales, so make() tabulates them once (nearest: one
// source index; bilinear: two indices and two weights) and the kernels only
// gather. The rules follow PyTorch's CPU results:
//   ratio    = 1/scale when a positive scale is given, else in/out
//   nearest  src = min(floor(dst * ratio), in - 1) in float32 arithmetic,
//            except out == in (copy) and out == 2 * in (dst / 2) exactly
//   bilinear src = ratio * (dst + 0.5) - 0.5 clamped at 0, or with
//            align_corners ratio = (in - 1)/(out - 1) and src = ratio * dst
//            (the scale is then unused); computed in the tensor's type;
//            out == in copies
// (torch 2.x's rules. torch 1.13 differs in two corners: its NCHW nearest
// forward with C > 1 skips the copy and halving shortcuts when a scale is
// given, and its float32 bilinear positions are computed in double.)
// Backward ops scatter-add grad_output through the same tables, one thread
// per (n, c) plane, so sums are race-free and in a fixed order.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/op.h"
#include "ops/parallel.h"

namespace ts {
namespace {

enum class Mode { Nearest, Bilinear };

constexpr int64_t kMaxSide = int64_t{1} << 24;  // output rows or columns

struct Geom {
  DType dtype = DType::F32;
  int64_t planes = 0, H = 0, W = 0, OH = 0, OW = 0;
  double sh = 0, sw = 0;  // scales as given; <= 0 or NaN: none (ratio in/out)
  bool align = false;
  Shape in_shape, out_shape;
};

std::string num_str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

double json_num(const NodeCtx& ctx, const json& v, const std::string& k) {
  if (v.is_string()) {  // non-finite floats travel as strings
    const std::string s = v.get<std::string>();
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    if (s == "nan") return NAN;
  }
  if (!v.is_number()) ctx.fail("attribute '" + k + "' must be a list of numbers");
  return v.get<double>();
}

// An int list attribute of exactly n values.
std::vector<int64_t> ints_n(const NodeCtx& ctx, const std::string& k, size_t n) {
  std::vector<int64_t> v = ctx.attr_ints(k);
  if (v.size() != n)
    ctx.fail(k + " must have " + std::to_string(n) + " values, got " + std::to_string(v.size()));
  return v;
}

double opt_scale(const NodeCtx& ctx, const std::string& k) {
  return ctx.has_attr(k) ? ctx.attr_float(k) : 0.0;
}

// Sizes and scales from the attributes of either overload. in: the
// (N, C, H, W) input shape (the forward's input, or input_size).
void read_sizes(const NodeCtx& ctx, bool vec, Geom& g) {
  if (g.in_shape.size() != 4) ctx.fail("input must be rank 4 (N, C, H, W), got " + shape_str(g.in_shape));
  for (int64_t d : g.in_shape)
    if (d < 0) ctx.fail("input sizes must not be negative, got " + shape_str(g.in_shape));
  g.H = g.in_shape[2], g.W = g.in_shape[3];
  if (__builtin_mul_overflow(g.in_shape[0], g.in_shape[1], &g.planes))
    ctx.fail("input is too large: " + shape_str(g.in_shape));
  const bool has_size = ctx.has_attr("output_size");
  if (vec) {
    const bool has_scale = ctx.has_attr("scale_factors");
    if (has_size == has_scale) ctx.fail("give exactly one of output_size and scale_factors");
    if (has_scale) {
      const json& sf = ctx.attrs().at("scale_factors");
      if (!sf.is_array() || sf.size() != 2)
        ctx.fail("scale_factors must have 2 values, got " + std::to_string(sf.is_array() ? sf.size() : 1));
      g.sh = json_num(ctx, sf[0], "scale_factors");
      g.sw = json_num(ctx, sf[1], "scale_factors");
      // torch truncates in * scale.
      const double oh = static_cast<double>(g.H) * g.sh, ow = static_cast<double>(g.W) * g.sw;
      const double cap = static_cast<double>(kMaxSide) + 1;
      if (!(oh >= 1 && ow >= 1 && oh < cap && ow < cap))
        ctx.fail("scale_factors " + num_str(g.sh) + ", " + num_str(g.sw) + " give no valid output size for input " +
                 hw(g.H, g.W));
      g.OH = static_cast<int64_t>(oh), g.OW = static_cast<int64_t>(ow);
    }
  } else {
    if (!has_size) ctx.fail("missing attribute 'output_size'");
    g.sh = opt_scale(ctx, "scales_h");
    g.sw = opt_scale(ctx, "scales_w");
  }
  if (has_size) {
    std::vector<int64_t> os = ints_n(ctx, "output_size", 2);
    g.OH = os[0], g.OW = os[1];
  }
  if (g.H < 1 || g.W < 1 || g.OH < 1 || g.OW < 1)
    ctx.fail("input and output sizes must be positive, got input " + hw(g.H, g.W) + " and output " + hw(g.OH, g.OW));
  // make() tabulates each output side: bound them (attributes are untrusted).
  if (g.OH > kMaxSide || g.OW > kMaxSide)
    ctx.fail("output size " + hw(g.OH, g.OW) + " is too large (at most " + std::to_string(kMaxSide) + " a side)");
  g.out_shape = {g.in_shape[0], g.in_shape[1], g.OH, g.OW};
  int64_t n = g.planes;
  if (__builtin_mul_overflow(n, g.OH, &n) || __builtin_mul_overflow(n, g.OW, &n))
    ctx.fail("output is too large: " + shape_str(g.out_shape));
}

void expect_float(const NodeCtx& ctx, const TensorType& t, const char* what) {
  if (!dtype_is_float(t.dtype))
    ctx.fail(std::string(what) + " must be float32, float64 or bfloat16, got " + t.str());
}

Geom geom(const NodeCtx& ctx, Mode mode, bool backward) {
  const bool vec = ctx.op().size() > 4 && ctx.op().compare(ctx.op().size() - 4, 4, ".vec") == 0;
  ctx.expect_inputs(1);
  Geom g;
  const TensorType& t = ctx.input(0);
  expect_float(ctx, t, backward ? "grad_output" : "input");
  g.dtype = t.dtype;
  if (mode == Mode::Bilinear) g.align = ctx.attr_bool("align_corners");
  g.in_shape = backward ? Shape(ints_n(ctx, "input_size", 4)) : t.shape;
  read_sizes(ctx, vec, g);
  if (backward && t.shape != g.out_shape)
    ctx.fail(std::string("grad_output must be ") + dtype_name(t.dtype) + shape_str(g.out_shape) + ", got " +
             t.str());
  return g;
}

template <Mode M, bool Backward>
std::vector<TensorType> infer(const NodeCtx& ctx) {
  Geom g = geom(ctx, M, Backward);
  return {{g.dtype, Backward ? g.in_shape : g.out_shape}};
}

// ---- index tables ----

int64_t nearest_src(int64_t dst, int64_t in, int64_t out, double scale) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const float ratio = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(dst) * ratio)), in - 1);
}

std::vector<int64_t> nearest_table(int64_t in, int64_t out, double scale) {
  std::vector<int64_t> t(out);
  for (int64_t o = 0; o < out; ++o) t[o] = nearest_src(o, in, out, scale);
  return t;
}

template <class T>
struct Taps {  // per output row or column: src i0 weight w0, src i1 weight w1
  std::vector<int64_t> i0, i1;
  std::vector<T> w0, w1;
};

template <class T>
Taps<T> linear_table(int64_t in, int64_t out, bool align, double scale) {
  Taps<T> t;
  t.i0.resize(out), t.i1.resize(out), t.w0.resize(out), t.w1.resize(out);
  T ratio;
  if (align)
    ratio = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else
    ratio = scale > 0 ? static_cast<T>(1.0 / scale) : static_cast<T>(in) / static_cast<T>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (in == out) {
      t.i0[o] = t.i1[o] = o, t.w0[o] = T(1), t.w1[o] = T(0);
      continue;
    }
    T src = align ? ratio * static_cast<T>(o) : ratio * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (src < T(0)) src = T(0);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const T frac = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
    t.i0[o] = i0;
    t.i1[o] = i0 + (i0 < in - 1 ? 1 : 0);
    t.w1[o] = frac;
    t.w0[o] = T(1) - frac;
  }
  return t;
}

// ---- kernels ----

template <class T>
std::unique_ptr<Kernel> nearest_kernel(const Geom& g, bool backward) {
  std::vector<int64_t> sh = nearest_table(g.H, g.OH, g.sh), sw = nearest_table(g.W, g.OW, g.sw);
  const bool par = g.planes * g.OH * g.OW > kParallelMin;
  if (!backward)
    return make_fn_kernel([g, sh, sw, par](const Tensor* in, Tensor* out) {
      T* y = out[0].as<T>();
      if (!y) return;
      const T* x = in[0].as<T>();
      parallel_for(g.planes * g.OH, par, [&](int64_t r) {
        const int64_t p = r / g.OH, oh = r % g.OH;
        const T* src = x + (p * g.H + sh[oh]) * g.W;
        T* dst = y + r * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) dst[ow] = src[sw[ow]];
      });
    });
  return make_fn_kernel([g, sh, sw, par](const Tensor* in, Tensor* out) {
    T* gi = out[0].as<T>();
    if (!gi) return;
    const T* go = in[0].as<T>();
    parallel_for(g.planes, par, [&](int64_t p) {
      T* gp = gi + p * g.H * g.W;
      std::fill(gp, gp + g.H * g.W, T(0));
      const T* gop = go + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        T* row = gp + sh[oh] * g.W;
        const T* grow = gop + oh * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) row[sw[ow]] += grow[ow];
      }
    });
  });
}

template <class T>
std::unique_ptr<Kernel> bilinear_kernel(const Geom& g, bool backward) {
  Taps<T> th = linear_table<T>(g.H, g.OH, g.align, g.sh), tw = linear_table<T>(g.W, g.OW, g.align, g.sw);
  const bool par = g.planes * g.OH * g.OW > kParallelMin;
  if (!backward)
    return make_fn_kernel([g, th, tw, par](const Tensor* in, Tensor* out) {
      T* y = out[0].as<T>();
      if (!y) return;
      const T* x = in[0].as<T>();
      parallel_for(g.planes * g.OH, par, [&](int64_t r) {
        const int64_t p = r / g.OH, oh = r % g.OH;
        const T* r0 = x + (p * g.H + th.i0[oh]) * g.W;
        const T* r1 = x + (p * g.H + th.i1[oh]) * g.W;
        const T a = th.w0[oh], b = th.w1[oh];
        T* dst = y + r * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t c0 = tw.i0[ow], c1 = tw.i1[ow];
          const T u = tw.w0[ow], v = tw.w1[ow];
          dst[ow] = a * (u * r0[c0] + v * r0[c1]) + b * (u * r1[c0] + v * r1[c1]);
        }
      });
    });
  return make_fn_kernel([g, th, tw, par](const Tensor* in, Tensor* out) {
    T* gi = out[0].as<T>();
    if (!gi) return;
    const T* go = in[0].as<T>();
    parallel_for(g.planes, par, [&](int64_t p) {
      T* gp = gi + p * g.H * g.W;
      std::fill(gp, gp + g.H * g.W, T(0));
      const T* gop = go + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        T* r0 = gp + th.i0[oh] * g.W;
        T* r1 = gp + th.i1[oh] * g.W;
        const T a = th.w0[oh], b = th.w1[oh];
        const T* grow = gop + oh * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t c0 = tw.i0[ow], c1 = tw.i1[ow];
          const T u = tw.w0[ow], v = tw.w1[ow], d = grow[ow];
          r0[c0] += a * u * d;
          r0[c1] += a * v * d;
          r1[c0] += b * u * d;
          r1[c1] += b * v * d;
        }
      }
    });
  });
}

template <Mode M, bool Backward>
std::unique_ptr<Kernel> make(const KernelCtx& k) {
  Geom g = geom(k.node, M, Backward);
  if (M == Mode::Nearest)
    return g.dtype == DType::F64 ? nearest_kernel<double>(g, Backward) : nearest_kernel<float>(g, Backward);
  return g.dtype == DType::F64 ? bilinear_kernel<double>(g, Backward) : bilinear_kernel<float>(g, Backward);
}

}  // namespace

void register_upsample_ops(OpRegistry& r) {
  const std::string f = " of float32/float64 (N, C, H, W)";
  const std::string near = "nearest 2-D upsampling" + f + ": source index floor(dst * ratio), ratio 1/scale "
                           "when a scale is given else in/out, as PyTorch";
  const std::string bil = "bilinear 2-D upsampling" + f + " (align_corners true or false), as PyTorch";
  const std::string scat = "; scatter-adds grad_output, one thread per (n, c) plane";
  auto cap = [](std::string d) {
    d[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(d[0])));
    return d;
  };
  r.add({"aten.upsample_nearest2d.vec", cap(near) + "; output_size or scale_factors",
         infer<Mode::Nearest, false>, make<Mode::Nearest, false>});
  r.add({"aten.upsample_nearest2d.default", cap(near) + "; output_size, optional scales_h/scales_w",
         infer<Mode::Nearest, false>, make<Mode::Nearest, false>});
  r.add({"aten.upsample_nearest2d_backward.vec", "Gradient of " + near + scat,
         infer<Mode::Nearest, true>, make<Mode::Nearest, true>});
  r.add({"aten.upsample_nearest2d_backward.default", "Gradient of " + near + scat,
         infer<Mode::Nearest, true>, make<Mode::Nearest, true>});
  r.add({"aten.upsample_bilinear2d.vec", cap(bil) + "; output_size or scale_factors",
         infer<Mode::Bilinear, false>, make<Mode::Bilinear, false>});
  r.add({"aten.upsample_bilinear2d.default", cap(bil) + "; output_size, optional scales_h/scales_w",
         infer<Mode::Bilinear, false>, make<Mode::Bilinear, false>});
  r.add({"aten.upsample_bilinear2d_backward.vec", "Gradient of " + bil + scat,
         infer<Mode::Bilinear, true>, make<Mode::Bilinear, true>});
  r.add({"aten.upsample_bilinear2d_backward.default", "Gradient of " + bil + scat,
         infer<Mode::Bilinear, true>, make<Mode::Bilinear, true>});
}

}  // namespace ts

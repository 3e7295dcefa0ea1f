// 2-D convolution forward and backward on oneDNN. Primitives pick their own
// (blocked) layouts via format_tag::any; tensors at the kernel boundary are
// NCHW/OIHW, or for activations the blocked layout the plan_layouts pass
// chose (ops/layout.h), and are reordered in and out through buffers owned
// by the kernel only where the primitive wants another layout.
// trainstep.conv2d_relu (made by the fuse_conv_relu pass) is the forward with
// an eltwise_relu post-op; it shares the convolution's schema and checks.
// That post-op turns NaN into 0, so a step whose inputs could produce a NaN
// (non-finite, or large enough to overflow) runs the plain convolution and
// a NaN-propagating relu instead.
//
// float64 (oneDNN has no f64 convolution on the CPU) runs as im2col +
// Gemm64 (gemm64.h) per sample and group, plain NCHW only (plan_layouts
// blocks float32 values only); the relu variants apply the relu / the mask
// around it the same way.
//
// 1-D convolution (N, C, L) runs as the 2-D one with H = 1 (ConvGeom), in
// every kernel here, fused forms included; its rank-3 values are never
// blocked (plan_layouts blocks rank-4 values only). Transposed convolution
// (transposed=true) is conv_transpose.cpp's: plain layouts, no fused form.
//
// bfloat16 runs on oneDNN's bf16 primitives (AMX or AVX512_BF16 where the
// CPU has them): bf16 input, weight, bias and gradients, float32
// accumulation, each result rounded once, as torch's CPU kernels do. Its
// activations are plain or channels-last. On AVX512_BF16 the backward of a
// channels-last 3x3 stride-1 convolution has a Winograd candidate
// (conv_winograd_bf16.h), which also says why the forward has none; every
// other bf16 kernel is oneDNN's only, and reports its implementation as its
// choice (bench --profile). A bf16 transposed
// convolution runs conv_transpose.cpp's float32 kernels between conversions.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "ops/bf16_kernel.h"
#include "ops/conv_transpose.h"
#include "ops/conv_wgrad_c1.h"
#include "ops/conv_depthwise.h"
#include "ops/conv_winograd.h"
#include "ops/conv_winograd_bf16.h"
#include "ops/dnnl_util.h"
#include "ops/gemm64.h"
#include "ops/kernel_choice.h"
#include "ops/layout.h"
#include "ops/op.h"
#include "ops/parallel.h"
#include "trainstep/bfloat16.h"

namespace ts {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
constexpr auto dt_bf16 = memory::data_type::bf16;

std::string dims_str(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

}  // namespace

Shape conv_out_shape(const ConvGeom& g) {
  return g.nd == 1 ? Shape{g.N, g.O, g.OW} : Shape{g.N, g.O, g.OH, g.OW};
}

ConvGeom conv_geom(const NodeCtx& ctx, int in_i, int w_i) {
  const TensorType& x = ctx.input(in_i);
  const TensorType& w = ctx.input(w_i);
  // transposed=true goes to conv_transpose.cpp before this is called.
  if (ctx.attr_bool("transposed")) ctx.fail("transposed convolution does not run here");
  if (x.dtype != w.dtype || !dtype_is_float(x.dtype))
    ctx.fail("input and weight must both be float32, both float64 or both bfloat16, got input " + x.str() +
             " and weight " + w.str());
  if (x.shape.size() != 3 && x.shape.size() != 4)
    ctx.fail("input must be rank 3 (N, C, L) or rank 4 (N, C, H, W), got " + x.str());
  ConvGeom g;
  g.nd = static_cast<int>(x.shape.size()) - 2;
  if (w.shape.size() != x.shape.size())
    ctx.fail(std::string("weight must be ") +
             (g.nd == 1 ? "rank 3 (O, C/groups, kL)" : "rank 4 (O, C/groups, kH, kW)") +
             " for input " + x.str() + ", got " + w.str());
  const bool d1 = g.nd == 1;
  g.N = x.shape[0], g.C = x.shape[1], g.H = d1 ? 1 : x.shape[2], g.W = x.shape[d1 ? 2 : 3];
  g.O = w.shape[0], g.KH = d1 ? 1 : w.shape[2], g.KW = w.shape[d1 ? 2 : 3];
  g.G = ctx.attr_int("groups");
  conv_attr_hw(ctx, "stride", g.nd, 1, g.sh, g.sw);
  conv_attr_hw(ctx, "padding", g.nd, 0, g.ph, g.pw);
  conv_attr_hw(ctx, "dilation", g.nd, 1, g.dh, g.dw);
  auto hw = [&](int64_t a, int64_t b) { return hw_str(g.nd, a, b); };
  if (g.G < 1) ctx.fail("groups must be positive, got " + std::to_string(g.G));
  if (g.sh < 1 || g.sw < 1) ctx.fail("stride must be positive, got " + hw(g.sh, g.sw));
  if (g.dh < 1 || g.dw < 1) ctx.fail("dilation must be positive, got " + hw(g.dh, g.dw));
  if (g.ph < 0 || g.pw < 0) ctx.fail("padding must be non-negative, got " + hw(g.ph, g.pw));
  if (g.O % g.G != 0)
    ctx.fail("weight out channels (" + std::to_string(g.O) + ") must be divisible by groups (" +
             std::to_string(g.G) + ")");
  int64_t wc = 0;  // weight channels * groups, checked: groups is an untrusted attribute
  const bool wc_over = __builtin_mul_overflow(w.shape[1], g.G, &wc);
  if (wc_over || wc != g.C)
    ctx.fail("input has " + std::to_string(g.C) + " channels but weight " + w.str() +
             " with groups=" + std::to_string(g.G) + " expects " +
             (wc_over ? std::string("more than int64 holds") : std::to_string(wc)));
  // size + 2 pad - dil (k - 1) - 1, overflow-checked: a wrapped value could
  // pass the positivity check below.
  auto span = [&](int64_t size, int64_t pad, int64_t dil, int64_t k) {
    int64_t d, n;
    if (__builtin_mul_overflow(dil, k - 1, &d) || __builtin_mul_overflow(pad, 2, &n) ||
        __builtin_add_overflow(n, size, &n) || __builtin_sub_overflow(n, d, &n) ||
        __builtin_sub_overflow(n, 1, &n))
      ctx.fail("padding " + hw(g.ph, g.pw) + " and dilation " + hw(g.dh, g.dw) +
               " overflow int64");
    return n;
  };
  int64_t nh = span(g.H, g.ph, g.dh, g.KH);
  int64_t nw = span(g.W, g.pw, g.dw, g.KW);
  g.OH = nh < 0 ? 0 : nh / g.sh + 1;
  g.OW = nw < 0 ? 0 : nw / g.sw + 1;
  if (g.OH < 1 || g.OW < 1 || g.N < 1 || g.C < 1 || g.O < 1 || g.KH < 1 || g.KW < 1)
    ctx.fail("output size is not positive: input " + x.str() + ", weight " + w.str() +
             ", padding " + hw(g.ph, g.pw) + ", dilation " + hw(g.dh, g.dw) +
             " give output " + hw(g.OH, g.OW));
  return g;
}

namespace {

tag layout_tag(Layout l) {
  switch (l) {
    case Layout::Blocked8: return tag::nChw8c;
    case Layout::Blocked16: return tag::nChw16c;
    case Layout::ChannelsLast: return tag::nhwc;
    default: return tag::nchw;
  }
}

// The layouts of the activation ports as stored in the arena: src (forward
// input 0, backward input 1), dst (forward output 0, backward grad_output)
// and dsrc (backward grad_input); dt, every port's element type (bf16
// ports are plain or channels-last).
struct ConvLayouts {
  Layout src = Layout::Plain, dst = Layout::Plain, dsrc = Layout::Plain;
  memory::data_type dt = f32;
};

// Memory descriptors and geometry in oneDNN terms (dilation counts from 0).
struct ConvMds {
  memory::desc src, wei, bias, dst, dsrc;    // as stored (ConvLayouts)
  memory::desc src_any, wei_any, dst_any;    // let the primitive choose
  memory::dims strides, dil, pad;
};

ConvMds conv_mds(const ConvGeom& g, const ConvLayouts& l) {
  ConvMds m;
  memory::dims src{g.N, g.C, g.H, g.W}, dst{g.N, g.O, g.OH, g.OW};
  // OIHW with groups is the same bytes as GOIHW with O split into (G, O/G).
  memory::dims wei = g.G == 1 ? memory::dims{g.O, g.C, g.KH, g.KW}
                              : memory::dims{g.G, g.O / g.G, g.C / g.G, g.KH, g.KW};
  m.src = memory::desc(src, l.dt, layout_tag(l.src));
  m.dst = memory::desc(dst, l.dt, layout_tag(l.dst));
  m.dsrc = memory::desc(src, l.dt, layout_tag(l.dsrc));
  m.wei = memory::desc(wei, l.dt, g.G == 1 ? tag::oihw : tag::goihw);
  m.bias = memory::desc({g.O}, l.dt, tag::x);
  // bfloat16 activations run channels-last whatever their stored layout:
  // oneDNN's AMX and AVX512_BF16 convolutions are fastest there (measured:
  // forward 1.7x, weight gradient 2.5x the layout `any` picks, docs/bf16.md).
  const tag act = l.dt == dt_bf16 ? tag::nhwc : tag::any;
  m.src_any = memory::desc(src, l.dt, act);
  m.dst_any = memory::desc(dst, l.dt, act);
  m.wei_any = memory::desc(wei, l.dt, tag::any);
  m.strides = {g.sh, g.sw};
  m.dil = {g.dh - 1, g.dw - 1};
  m.pad = {g.ph, g.pw};  // symmetric: PyTorch's floor formula matches oneDNN's check
  return m;
}

dnnl::convolution_forward::primitive_desc fwd_pd(const ConvMds& m, bool bias,
                                                 const dnnl::primitive_attr& attr) {
  auto a = dnnl::algorithm::convolution_direct;
  auto pk = dnnl::prop_kind::forward_training;
  auto d = bias ? dnnl::convolution_forward::desc(pk, a, m.src_any, m.wei_any, m.bias, m.dst_any,
                                                  m.strides, m.dil, m.pad, m.pad)
                : dnnl::convolution_forward::desc(pk, a, m.src_any, m.wei_any, m.dst_any,
                                                  m.strides, m.dil, m.pad, m.pad);
  return dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
}

// v's float32 bits (bfloat16 is their top half).
uint32_t float_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
uint32_t float_bits(uint16_t v) { return uint32_t(v) << 16; }

// Largest |v| over n values as float32 bits; >= 0x7f800000 means some
// value is inf or NaN. Integer max, so it vectorises and never misses a NaN.
template <class T>
uint32_t max_abs_bits(const T* p, int64_t n) {
  auto abs_bits = [p](int64_t i) { return float_bits(p[i]) & 0x7fffffffu; };
  uint32_t m = 0;
  if (omp_can_fork()) {  // no one-thread region: it would allocate a team
#pragma omp parallel for reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(i));
  } else {
    for (int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(i));
  }
  return m;
}

float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// As aten.relu: negatives become +0, NaN and -0 stay.
void relu_in_place(float* y, int64_t n) {
  parallel_for(n, true, [&](int64_t i) { y[i] = y[i] < 0.f ? 0.f : y[i]; });
}
void relu_in_place(uint16_t* y, int64_t n) {
  parallel_for(n, true, [&](int64_t i) { y[i] = bf16_to_float(y[i]) < 0.f ? 0 : y[i]; });
}

// x passes relu's backward where(x <= 0, 0, g): !(x <= 0), so NaN passes.
bool passes_relu(float x) { return !(x <= 0.f); }
bool passes_relu(uint16_t x) { return !(bf16_to_float(x) <= 0.f); }

class ConvFwdKernel : public Kernel {
 public:
  ConvFwdKernel(const ConvGeom& g, const ConvLayouts& l, bool bias, bool relu)
      : bias_(bias), relu_(relu), bf16_(l.dt == dt_bf16) {
    ConvMds m = conv_mds(g, l);
    dnnl::primitive_attr attr = user_scratchpad_attr();
    if (relu) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    auto pd = fwd_pd(m, bias, attr);
    src_ = DnnlPort(m.src, pd.src_desc(), true);
    wei_ = DnnlPort(m.wei, pd.weights_desc(), true);
    dst_ = DnnlPort(m.dst, pd.dst_desc(), false);
    conv_ = make_step(pd, bias, m);
    impl_ = pd.impl_info_str();
    if (relu) {
      // The same convolution without the post-op, on the same layouts, for
      // steps whose inputs could give a NaN (see run()).
      ConvMds same = m;
      same.src_any = pd.src_desc();
      same.wei_any = pd.weights_desc();
      same.dst_any = pd.dst_desc();
      plain_conv_ = make_step(fwd_pd(same, bias, user_scratchpad_attr()), bias, m);
      red_ = g.C / g.G * g.KH * g.KW;
      n_src_ = g.N * g.C * g.H * g.W;
      n_wei_ = g.O * (g.C / g.G) * g.KH * g.KW;
      n_out_ = g.N * g.O * g.OH * g.OW;
      n_bias_ = g.O;
    }
  }

  const std::string& impl() const { return impl_; }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    src_.set(in[0].data);
    wei_.set(in[1].data);
    dst_.set(out[0].data);
    if (bias_) bmem_.set_data_handle(in[2].data);
    src_.sync();
    wei_.sync();
    if (relu_ && !(bf16_ ? surely_finite<uint16_t>(in) : surely_finite<float>(in))) {
      plain_conv_.exec();
      dst_.sync();
      if (bf16_)
        relu_in_place(out[0].as<uint16_t>(), n_out_);
      else
        relu_in_place(out[0].as<float>(), n_out_);
      return;
    }
    conv_.exec();
    dst_.sync();
  }

 private:
  DnnlStep make_step(const dnnl::convolution_forward::primitive_desc& pd, bool bias,
                     const ConvMds& m) {
    DnnlStep st;
    st.prim = dnnl::convolution_forward(pd);
    st.bind(DNNL_ARG_SRC, src_.inner);
    st.bind(DNNL_ARG_WEIGHTS, wei_.inner);
    st.bind(DNNL_ARG_DST, dst_.inner);
    if (bias) {
      if (!bmem_) bmem_ = plain_memory(m.bias);
      st.bind(DNNL_ARG_BIAS, bmem_);
    }
    bind_scratchpad(st, pd.scratchpad_desc());
    return st;
  }

  // oneDNN's relu post-op maps NaN to 0, PyTorch's relu keeps it. The
  // convolution's result has no NaN (nor inf) when every input is finite
  // and |x|max * |w|max * (C/G*kH*kW) + |b|max stays well below FLT_MAX.
  // (The bound is on the float32 accumulator; bf16 has float32's range.)
  template <class T>
  bool surely_finite(const Tensor* in) const {
    const uint32_t inf = 0x7f800000u;
    uint32_t bx = max_abs_bits(in[0].as<T>(), n_src_);
    uint32_t bw = max_abs_bits(in[1].as<T>(), n_wei_);
    uint32_t bb = bias_ ? max_abs_bits(in[2].as<T>(), n_bias_) : 0;
    if (bx >= inf || bw >= inf || bb >= inf) return false;
    double bound = double(bits_float(bx)) * bits_float(bw) * double(red_) + bits_float(bb);
    return bound < 0.5 * double(std::numeric_limits<float>::max());
  }

  bool bias_, relu_, bf16_;
  std::string impl_;
  int64_t red_ = 0, n_src_ = 0, n_wei_ = 0, n_out_ = 0, n_bias_ = 0;
  DnnlPort src_, wei_, dst_;
  memory bmem_;
  DnnlStep conv_, plain_conv_;
};

// ---- float64: im2col + Gemm64 ----

// Per sample and group: col (C/G*kH*kW, OH*OW) of the input window values
// (0 in the padding), so the convolution is W_g (O/G, C/G*kH*kW) @ col.
struct Im2col {
  ConvGeom g;
  int64_t og, cg, ckk, ohw;
  explicit Im2col(const ConvGeom& geom) : g(geom) {
    og = g.O / g.G;
    cg = g.C / g.G;
    ckk = cg * g.KH * g.KW;
    ohw = g.OH * g.OW;
  }
  bool parallel() const { return ckk * ohw > (1 << 15); }
  // x: the group's cg input channels (H, W each).
  void gather(const double* x, double* col) const {
    parallel_for(ckk, parallel(), [&](int64_t r) {
      const int64_t c = r / (g.KH * g.KW), kh = r / g.KW % g.KH, kw = r % g.KW;
      const double* xc = x + c * g.H * g.W;
      double* dst = col + r * ohw;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        double* d = dst + oh * g.OW;
        if (ih < 0 || ih >= g.H) {
          for (int64_t ow = 0; ow < g.OW; ++ow) d[ow] = 0.0;
          continue;
        }
        const double* xr = xc + ih * g.W;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
          d[ow] = iw >= 0 && iw < g.W ? xr[iw] : 0.0;
        }
      }
    });
  }
  // dx (the group's cg channels) = the sum of col's values over the windows
  // that read each element. Channels in parallel: each writes its own.
  void scatter(const double* col, double* dx) const {
    parallel_for(cg, parallel(), [&](int64_t c) {
      double* xc = dx + c * g.H * g.W;
      for (int64_t i = 0; i < g.H * g.W; ++i) xc[i] = 0.0;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const double* src = col + ((c * g.KH + kh) * g.KW + kw) * ohw;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            double* xr = xc + ih * g.W;
            const double* s = src + oh * g.OW;
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
              if (iw >= 0 && iw < g.W) xr[iw] += s[ow];
            }
          }
        }
    });
  }
};

class Conv64FwdKernel : public Kernel {
 public:
  Conv64FwdKernel(const ConvGeom& g, bool bias, bool relu, int threads)
      : ic_(g), bias_(bias), relu_(relu),
        gemm_(1, ic_.og, ic_.ohw, ic_.ckk, false, false, threads),
        col_(sizeof(double) * size_t(ic_.ckk * ic_.ohw)) {}

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const ConvGeom& g = ic_.g;
    const double* x = in[0].as<double>();
    const double* w = in[1].as<double>();
    const double* b = bias_ ? in[2].as<double>() : nullptr;
    double* y = out[0].as<double>();
    double* col = static_cast<double*>(col_.data());
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gr = 0; gr < g.G; ++gr) {
        ic_.gather(x + (n * g.C + gr * ic_.cg) * g.H * g.W, col);
        double* yg = y + (n * g.O + gr * ic_.og) * ic_.ohw;
        if (b)
          for (int64_t o = 0; o < ic_.og; ++o)
            std::fill(yg + o * ic_.ohw, yg + (o + 1) * ic_.ohw, b[gr * ic_.og + o]);
        gemm_.run(w + gr * ic_.og * ic_.ckk, col, yg, 1.0, b ? 1.0 : 0.0);
      }
    if (relu_) {  // as aten.relu: NaN stays
      const int64_t n = out[0].numel();
      parallel_for(n, n > (1 << 15), [&](int64_t i) { y[i] = y[i] < 0.0 ? 0.0 : y[i]; });
    }
  }

 private:
  Im2col ic_;
  bool bias_, relu_;
  Gemm64 gemm_;
  Buffer col_;
};

// Gradients: grad_weight_g += dy_g (O/G, OH*OW) @ col^T; grad_input's
// col = W_g^T @ dy_g, scattered back; grad_bias sums dy per channel. The
// relu mask (trainstep.conv_backward_relu) is taken from x after the
// weight gradient has read x and before grad_input (which may be x's
// buffer) is written.
class Conv64BwdKernel : public Kernel {
 public:
  Conv64BwdKernel(const ConvGeom& g, bool want_in, bool want_w, bool want_b, bool relu_mask,
                  int threads)
      : ic_(g), want_in_(want_in), want_w_(want_w), want_b_(want_b), relu_mask_(relu_mask),
        gemm_w_(1, ic_.og, ic_.ckk, ic_.ohw, false, true, threads),
        gemm_d_(1, ic_.ckk, ic_.ohw, ic_.og, true, false, threads),
        col_(sizeof(double) * size_t(ic_.ckk * ic_.ohw)) {
    if (relu_mask) mask_.assign(size_t((g.N * g.C * g.H * g.W + 63) / 64), 0);
  }

  void run(const Tensor* in, Tensor* out) override {
    const ConvGeom& g = ic_.g;
    const double* dy = in[0].as<double>();
    const double* x = in[1].as<double>();
    const double* w = in[2].as<double>();
    double* col = static_cast<double*>(col_.data());
    double* dw = want_w_ && out[1].data ? out[1].as<double>() : nullptr;
    double* db = want_b_ && out[2].data ? out[2].as<double>() : nullptr;
    double* dx = want_in_ && out[0].data ? out[0].as<double>() : nullptr;
    if (dw)
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gr = 0; gr < g.G; ++gr) {
          ic_.gather(x + (n * g.C + gr * ic_.cg) * g.H * g.W, col);
          gemm_w_.run(dy + (n * g.O + gr * ic_.og) * ic_.ohw, col, dw + gr * ic_.og * ic_.ckk,
                      1.0, n == 0 ? 0.0 : 1.0);
        }
    if (db) {
      parallel_for(g.O, g.O * g.N * ic_.ohw > (1 << 15), [&](int64_t o) {
        double s = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const double* d = dy + (n * g.O + o) * ic_.ohw;
          for (int64_t i = 0; i < ic_.ohw; ++i) s += d[i];
        }
        db[o] = s;
      });
    }
    if (!dx) return;
    const int64_t n_in = g.N * g.C * g.H * g.W;
    if (relu_mask_) {
      const int64_t words = static_cast<int64_t>(mask_.size());
      parallel_for(words, words > 256, [&](int64_t wd) {
        uint64_t bits = 0;
        const int64_t lo = wd * 64, n = std::min<int64_t>(64, n_in - lo);
        for (int64_t b = 0; b < n; ++b) bits |= static_cast<uint64_t>(!(x[lo + b] <= 0.0)) << b;
        mask_[wd] = bits;
      });
    }
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gr = 0; gr < g.G; ++gr) {
        gemm_d_.run(w + gr * ic_.og * ic_.ckk, dy + (n * g.O + gr * ic_.og) * ic_.ohw, col);
        ic_.scatter(col, dx + (n * g.C + gr * ic_.cg) * g.H * g.W);
      }
    if (relu_mask_) {
      const int64_t words = static_cast<int64_t>(mask_.size());
      parallel_for(words, words > 256, [&](int64_t wd) {
        const uint64_t bits = mask_[wd];
        const int64_t lo = wd * 64, n = std::min<int64_t>(64, n_in - lo);
        for (int64_t b = 0; b < n; ++b) dx[lo + b] = (bits >> b) & 1 ? dx[lo + b] : 0.0;
      });
    }
  }

 private:
  Im2col ic_;
  bool want_in_, want_w_, want_b_, relu_mask_;
  Gemm64 gemm_w_, gemm_d_;
  Buffer col_;
  std::vector<uint64_t> mask_;
};

// float64 transposed convolution (conv_transpose.h): the kernels above
// over the dual direct convolution.
class ConvT64FwdKernel : public Kernel {
 public:
  ConvT64FwdKernel(const ConvGeom& dual, bool bias, int threads)
      : g_(dual), bias_(bias), data_(dual, true, false, false, false, threads) {}

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    // y = dual's input gradient for "dy" = x (dual's x is not read).
    Tensor din[3] = {in[0], Tensor{}, in[1]};
    Tensor dout[3] = {out[0], Tensor{}, Tensor{}};
    data_.run(din, dout);
    if (!bias_) return;
    const double* b = in[2].as<double>();
    double* y = out[0].as<double>();
    const int64_t hw = g_.H * g_.W;
    parallel_for(g_.N * g_.C, g_.N * g_.C * hw > (1 << 15), [&](int64_t nc) {
      double* p = y + nc * hw;
      const double v = b[nc % g_.C];
      for (int64_t i = 0; i < hw; ++i) p[i] += v;
    });
  }

 private:
  ConvGeom g_;
  bool bias_;
  Conv64BwdKernel data_;
};

class ConvT64BwdKernel : public Kernel {
 public:
  ConvT64BwdKernel(const ConvGeom& dual, bool want_in, bool want_w, bool want_b, int threads)
      : g_(dual), want_in_(want_in), want_w_(want_w), want_b_(want_b),
        data_(dual, false, false, threads), weight_(dual, false, true, false, false, threads) {}

  // in: grad_output (dual's input), x (dual's output), weight.
  void run(const Tensor* in, Tensor* out) override {
    if (want_w_ && out[1].data) {  // dual's weight gradient, dy = x, x = grad_output
      Tensor win[3] = {in[1], in[0], in[2]};
      Tensor wout[3] = {Tensor{}, out[1], Tensor{}};
      weight_.run(win, wout);
    }
    if (want_b_ && out[2].data) {  // per output channel of the transposed conv
      const double* dy = in[0].as<double>();
      double* db = out[2].as<double>();
      const int64_t hw = g_.H * g_.W;
      parallel_for(g_.C, g_.C * g_.N * hw > (1 << 15), [&](int64_t c) {
        double s = 0;
        for (int64_t n = 0; n < g_.N; ++n) {
          const double* d = dy + (n * g_.C + c) * hw;
          for (int64_t i = 0; i < hw; ++i) s += d[i];
        }
        db[c] = s;
      });
    }
    if (want_in_ && out[0].data) {  // dual's forward of grad_output
      Tensor fin[3] = {in[0], in[2], Tensor{}};  // no bias
      data_.run(fin, out);
    }
  }

 private:
  ConvGeom g_;
  bool want_in_, want_w_, want_b_;
  Conv64FwdKernel data_;
  Conv64BwdKernel weight_;
};

}  // namespace

std::unique_ptr<Kernel> conv64_transposed_fwd(const ConvGeom& dual, bool bias, int threads) {
  return std::make_unique<ConvT64FwdKernel>(dual, bias, threads);
}

std::unique_ptr<Kernel> conv64_transposed_bwd(const ConvGeom& dual, bool want_in, bool want_w,
                                              bool want_b, int threads) {
  return std::make_unique<ConvT64BwdKernel>(dual, want_in, want_w, want_b, threads);
}

namespace {

std::vector<TensorType> infer_conv(const NodeCtx& ctx) {
  if (ctx.num_inputs() != 3 && ctx.num_inputs() != 2)
    ctx.fail("expected inputs (input, weight, bias?), got " + std::to_string(ctx.num_inputs()));
  if (ctx.attr_bool("transposed")) return conv_transpose::infer_fwd(ctx);
  ConvGeom g = conv_geom(ctx, 0, 1);
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.input(2);
    const DType t = ctx.input(0).dtype;
    if (b.dtype != t || b.shape != Shape{g.O})
      ctx.fail("bias must be " + std::string(dtype_name(t)) + "[" + std::to_string(g.O) +
               "], got " + b.str());
  }
  TensorType y{ctx.input(0).dtype, conv_out_shape(g)};
  check_layout_ports(ctx, {0}, {0});
  port_layout(ctx, false, 0, ctx.input(0));
  port_layout(ctx, true, 0, y);
  return {y};
}

// The shape part of a kernel-choice key (kernel_choice.h).
std::string geom_key(const ConvGeom& g) {
  return "n=" + std::to_string(g.N) + " c=" + std::to_string(g.C) + " o=" + std::to_string(g.O) +
         " hw=" + dims_str(g.H, g.W) + " k=" + dims_str(g.KH, g.KW) + " s=" + dims_str(g.sh, g.sw) +
         " p=" + dims_str(g.ph, g.pw) + " d=" + dims_str(g.dh, g.dw);
}

// A forward oneDNN or a kernel of our own (conv_winograd.h,
// conv_depthwise.h) can compute: whichever measures faster here
// (kernel_choice.h).
std::unique_ptr<Kernel> choose_fwd(const KernelCtx& k, const ConvGeom& g, const ConvLayouts& l,
                                   bool bias, bool relu, const LazyCandidate& alt) {
  const std::vector<LazyCandidate> cands = {
      {"onednn", [&]() -> std::unique_ptr<Kernel> {
         return std::make_unique<ConvFwdKernel>(g, l, bias, relu);
       }},
      alt};
  const std::string key = "conv_fwd " + geom_key(g) + " x=" + layout_name(l.src) +
                          (bias ? " +bias" : "") + (relu ? " +relu" : "");
  LazyChoice r = choose_kernel_lazily(key, k, k.outputs, cands);
  std::unique_ptr<Kernel> pick = r.built ? std::move(r.built) : cands[r.choice.pick].make();
  return std::make_unique<ChosenKernel>(std::move(pick), std::move(r.choice));
}

// A bfloat16 node whose oneDNN form cannot run (a transposed convolution,
// or a CPU with no bfloat16 products) runs its float32 twin.
bool bf16_via_float32(const KernelCtx& k, DType dt) {
  return dt == DType::BF16 && (k.node.attr_bool("transposed") || !dnnl_bf16_available());
}

std::unique_ptr<Kernel> via_float32(const KernelCtx& k) {
  return make_via_float32(*OpRegistry::get().find(k.node.op()), k);
}

// bfloat16: oneDNN's forward, the one implementation, reported as the
// kernel's choice (bench --profile shows which ISA runs it).
std::unique_ptr<Kernel> bf16_fwd(const ConvGeom& g, const ConvLayouts& l, bool bias, bool relu) {
  auto kern = std::make_unique<ConvFwdKernel>(g, l, bias, relu);
  const std::string key =
      "conv_fwd bf16 " + geom_key(g) + (bias ? " +bias" : "") + (relu ? " +relu" : "");
  KernelChoice c = only_choice(key, "onednn " + kern->impl());
  return std::make_unique<ChosenKernel>(std::move(kern), std::move(c));
}

template <bool Relu>
std::unique_ptr<Kernel> make_conv(const KernelCtx& k) {
  const DType dt = k.node.input(0).dtype;
  if (bf16_via_float32(k, dt)) return via_float32(k);
  if (k.node.attr_bool("transposed")) return conv_transpose::make_fwd(k);
  try {
    if (dt == DType::F64)
      return std::make_unique<Conv64FwdKernel>(conv_geom(k.node, 0, 1), k.node.has_input(2), Relu,
                                               k.threads);
    ConvLayouts l;
    l.src = port_layout(k.node, false, 0, k.node.input(0));
    l.dst = port_layout(k.node, true, 0, k.outputs[0]);
    l.dt = dnnl_type(dt);
    const ConvGeom g = conv_geom(k.node, 0, 1);
    const bool bias = k.node.has_input(2);
    if (dt == DType::BF16) return bf16_fwd(g, l, bias, Relu);
    if (l.src == l.dst && winograd_suits(g, l.src) && winograd_worth_timing(g))
      return choose_fwd(k, g, l, bias, Relu, {"winograd", [&] {
                          return make_winograd_fwd(g, l.src, bias, Relu, k.threads);
                        }});
    if (!Relu && depthwise_suits(g))
      return choose_fwd(k, g, l, bias, Relu, {"depthwise", [&] {
                          return make_depthwise_fwd(g, l.src, l.dst, bias, k.threads);
                        }});
    return std::make_unique<ConvFwdKernel>(g, l, bias, Relu);
  } catch (const dnnl::error& e) {
    k.node.fail(std::string("oneDNN could not build the convolution: ") + e.what());
  }
}

// Backward: diff_src via convolution_backward_data, diff_weights (and
// diff_bias) via convolution_backward_weights, both hinted by the forward pd.
// relu_mask (trainstep.conv_backward_relu): grad_input is also masked by the
// relu that made the input x, where(x <= 0, 0, grad_input), and may be
// written over x. So the order is: grad_weight and grad_bias (they read x),
// x's mask into bits the kernel owns, grad_input, the mask.
class ConvBwdKernel : public Kernel {
 public:
  ConvBwdKernel(const ConvGeom& g, const ConvLayouts& l, bool want_in, bool want_w, bool want_b,
                bool relu_mask)
      : relu_mask_(relu_mask), bf16_(l.dt == dt_bf16) {
    if (relu_mask) {
      n_in_ = g.N * g.C * g.H * g.W;
      mask_.assign((n_in_ + 63) / 64, 0);
    }
    ConvMds m = conv_mds(g, l);
    auto attr = user_scratchpad_attr();
    auto hint = fwd_pd(m, want_b, attr);
    auto a = dnnl::algorithm::convolution_direct;
    if (want_in) {
      dnnl::convolution_backward_data::desc d(a, m.src_any, m.wei_any, m.dst_any, m.strides, m.dil,
                                              m.pad, m.pad);
      dnnl::convolution_backward_data::primitive_desc pd(d, attr, cpu_engine(), hint);
      dd_data_ = DnnlPort(m.dst, pd.diff_dst_desc(), true);
      wei_ = DnnlPort(m.wei, pd.weights_desc(), true);
      dsrc_ = DnnlPort(m.dsrc, pd.diff_src_desc(), false);
      data_.prim = dnnl::convolution_backward_data(pd);
      data_.bind(DNNL_ARG_DIFF_DST, dd_data_.inner);
      data_.bind(DNNL_ARG_WEIGHTS, wei_.inner);
      data_.bind(DNNL_ARG_DIFF_SRC, dsrc_.inner);
      bind_scratchpad(data_, pd.scratchpad_desc());
      data_impl_ = pd.impl_info_str();
    }
    if (want_w || want_b) {
      using BW = dnnl::convolution_backward_weights;
      auto d = want_b ? BW::desc(a, m.src_any, m.wei_any, m.bias, m.dst_any, m.strides, m.dil,
                                 m.pad, m.pad)
                      : BW::desc(a, m.src_any, m.wei_any, m.dst_any, m.strides, m.dil, m.pad,
                                 m.pad);
      BW::primitive_desc pd(d, attr, cpu_engine(), hint);
      src_ = DnnlPort(m.src, pd.src_desc(), true);
      dwei_ = DnnlPort(m.wei, pd.diff_weights_desc(), false);
      // Reuse the backward-data reorder of grad_output when layouts agree.
      share_dd_ = want_in && pd.diff_dst_desc() == dd_data_.inner.get_desc();
      if (!share_dd_) dd_wei_ = DnnlPort(m.dst, pd.diff_dst_desc(), true);
      wgt_.prim = BW(pd);
      wgt_.bind(DNNL_ARG_SRC, src_.inner);
      wgt_.bind(DNNL_ARG_DIFF_DST, share_dd_ ? dd_data_.inner : dd_wei_.inner);
      wgt_.bind(DNNL_ARG_DIFF_WEIGHTS, dwei_.inner);
      if (want_b) {
        dbias_ = plain_memory(m.bias);
        wgt_.bind(DNNL_ARG_DIFF_BIAS, dbias_);
        spare_b_ = owned_memory(m.bias);
      }
      // When only grad_bias is read, grad_weight still needs somewhere to go.
      if (!dwei_.reorder) spare_w_ = owned_memory(m.wei);
      bind_scratchpad(wgt_, pd.scratchpad_desc());
      weight_impl_ = pd.impl_info_str();
    }
    has_data_ = want_in;
    has_wgt_ = want_w || want_b;
    has_bias_ = want_b;
  }

  // The oneDNN implementations of the input and weight gradients (empty
  // where that part is not computed).
  const std::string& data_impl() const { return data_impl_; }
  const std::string& weight_impl() const { return weight_impl_; }

  void run(const Tensor* in, Tensor* out) override {
    bool do_data = has_data_ && out[0].data;
    bool do_w = has_wgt_ && (out[1].data || (has_bias_ && out[2].data));
    if (do_data || (do_w && share_dd_)) {
      dd_data_.set(in[0].data);
      dd_data_.sync();
    }
    if (do_w) {
      if (!share_dd_) {
        dd_wei_.set(in[0].data);
        dd_wei_.sync();
      }
      src_.set(in[1].data);
      src_.sync();
      if (out[1].data)
        dwei_.set(out[1].data);
      else if (!dwei_.reorder)
        dwei_.set(spare_w_.get_data_handle());
      if (has_bias_) dbias_.set_data_handle(out[2].data ? out[2].data : spare_b_.get_data_handle());
      wgt_.exec();
      if (out[1].data) dwei_.sync();
    }
    if (do_data) {
      if (relu_mask_ && bf16_) save_mask(in[1].as<uint16_t>());
      if (relu_mask_ && !bf16_) save_mask(in[1].as<float>());
      wei_.set(in[2].data);
      wei_.sync();
      dsrc_.set(out[0].data);
      data_.exec();
      dsrc_.sync();
      if (relu_mask_ && bf16_) apply_mask(out[0].as<uint16_t>());
      if (relu_mask_ && !bf16_) apply_mask(out[0].as<float>());
    }
  }

 private:
  // Bit i: x[i] passes the relu backward, i.e. !(x[i] <= 0) (NaN passes).
  template <class T>
  void save_mask(const T* x) {
    const int64_t words = static_cast<int64_t>(mask_.size());
    parallel_for(words, words > 256, [&](int64_t w) {
      uint64_t bits = 0;
      const int64_t lo = w * 64, n = std::min<int64_t>(64, n_in_ - lo);
      for (int64_t b = 0; b < n; ++b) bits |= static_cast<uint64_t>(passes_relu(x[lo + b])) << b;
      mask_[w] = bits;
    });
  }
  template <class T>
  void apply_mask(T* d) const {
    const int64_t words = static_cast<int64_t>(mask_.size());
    parallel_for(words, words > 256, [&](int64_t w) {
      const uint64_t bits = mask_[w];
      const int64_t lo = w * 64, n = std::min<int64_t>(64, n_in_ - lo);
      for (int64_t b = 0; b < n; ++b) d[lo + b] = (bits >> b) & 1 ? d[lo + b] : T(0);  // +0
    });
  }

  bool has_data_ = false, has_wgt_ = false, has_bias_ = false, share_dd_ = false;
  bool relu_mask_ = false, bf16_ = false;
  std::string data_impl_, weight_impl_;
  int64_t n_in_ = 0;
  std::vector<uint64_t> mask_;  // relu_mask: one bit per input element
  DnnlPort dd_data_, wei_, dsrc_;       // backward data
  DnnlPort dd_wei_, src_, dwei_;        // backward weights
  memory dbias_, spare_b_, spare_w_;
  DnnlStep data_, wgt_;
};

std::vector<TensorType> infer_conv_bwd(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  if (ctx.attr_bool("transposed")) return conv_transpose::infer_bwd(ctx);
  ConvGeom g = conv_geom(ctx, 1, 2);
  conv_output_mask(ctx);
  const TensorType& go = ctx.input(0);
  Shape want = conv_out_shape(g);
  const DType t = ctx.input(1).dtype;
  if (go.dtype != t || go.shape != want)
    ctx.fail("grad_output must be " + std::string(dtype_name(t)) + shape_str(want) + ", got " +
             go.str());
  check_layout_ports(ctx, {0, 1}, {0});
  port_layout(ctx, false, 0, go);
  port_layout(ctx, false, 1, ctx.input(1));
  port_layout(ctx, true, 0, ctx.input(1));
  return {ctx.input(1), conv_grad_weight_type(ctx.input(2), conv_output_mask(ctx)[1]), {t, {g.O}}};
}

std::vector<TensorType> infer_conv_bwd_relu(const NodeCtx& ctx) {
  std::vector<TensorType> t = infer_conv_bwd(ctx);
  if (!conv_output_mask(ctx)[0]) ctx.fail("output_mask[0] (grad_input) must be true");
  // The mask is taken from x and applied to grad_input element by element.
  if (port_layout(ctx, false, 1, t[0]) != port_layout(ctx, true, 0, t[0]))
    ctx.fail("input 1 (x) and output 0 (grad_input) must have one layout: the relu mask is "
             "applied element by element");
  return t;
}

// The weight gradient, then the input gradient (after: it may be written
// over x), on two kernels; either may be absent.
class SplitBwdKernel : public Kernel {
 public:
  SplitBwdKernel(std::unique_ptr<Kernel> weight, std::unique_ptr<Kernel> data)
      : weight_(std::move(weight)), data_(std::move(data)) {}
  void run(const Tensor* in, Tensor* out) override {
    if (weight_) weight_->run(in, out);
    if (data_) data_->run(in, out);
  }

 private:
  std::unique_ptr<Kernel> weight_, data_;
};

// A convolution backward whose input gradient and/or weight gradient has
// a candidate of its own beside oneDNN's (conv_winograd.h, conv_wgrad_c1.h,
// conv_depthwise.h;
// null: oneDNN's only): each part is computed by whichever measures faster
// here (kernel_choice.h). Where every pick is oneDNN's, one oneDNN kernel
// computes the whole backward (it reorders grad_output once for both), not
// the timed parts; otherwise the weight gradient runs first, then the
// input gradient (which may be written over x).
std::unique_ptr<Kernel> choose_bwd(const KernelCtx& k, const ConvGeom& g, const ConvLayouts& l,
                                   const std::vector<bool>& m, bool relu,
                                   const LazyCandidate* data_alt, const LazyCandidate* weight_alt) {
  const bool bf16 = l.dt == dt_bf16;
  const std::string dy = std::string(" dy=") + layout_name(l.dst);
  const std::string dgrad = bf16 ? "conv_dgrad bf16 " : "conv_dgrad ";
  const std::string wgrad = bf16 ? "conv_wgrad bf16 " : "conv_wgrad ";
  std::vector<KernelChoice> choices;
  auto choose = [&](const std::string& key, const LazyCandidate& onednn,
                    const LazyCandidate& alt) {
    const std::vector<LazyCandidate> cands = {onednn, alt};
    LazyChoice r = choose_kernel_lazily(key, k, k.outputs, cands);
    std::unique_ptr<Kernel> won;  // the alternative's kernel, if it won
    if (r.choice.pick == 1) won = r.built ? std::move(r.built) : alt.make();
    choices.push_back(std::move(r.choice));
    return won;
  };
  // bfloat16 names oneDNN's candidates by their implementations, so bench
  // --profile shows the ISA they ran on.
  std::unique_ptr<ConvBwdKernel> built_data, built_weight;
  std::string data_name = "onednn", weight_name = "onednn";
  if (bf16 && data_alt) {
    built_data = std::make_unique<ConvBwdKernel>(g, l, true, false, false, relu);
    data_name += " " + built_data->data_impl();
  }
  if (bf16 && weight_alt) {
    built_weight = std::make_unique<ConvBwdKernel>(g, l, false, m[1], m[2], false);
    weight_name += " " + built_weight->weight_impl();
  }
  auto onednn_data = [&]() -> std::unique_ptr<Kernel> {
    if (built_data) return std::move(built_data);
    return std::make_unique<ConvBwdKernel>(g, l, true, false, false, relu);
  };
  auto onednn_weight = [&]() -> std::unique_ptr<Kernel> {
    if (built_weight) return std::move(built_weight);
    return std::make_unique<ConvBwdKernel>(g, l, false, m[1], m[2], false);
  };
  std::unique_ptr<Kernel> data, weight;
  if (data_alt)
    data = choose(dgrad + geom_key(g) + dy + (relu ? " +relu_mask" : ""), {data_name, onednn_data},
                  *data_alt);
  if (weight_alt)
    weight = choose(wgrad + geom_key(g) + dy + (m[2] ? " +bias" : ""),
                    {weight_name, onednn_weight}, *weight_alt);
  std::unique_ptr<Kernel> pick;
  if (!data && !weight) {
    pick = std::make_unique<ConvBwdKernel>(g, l, m[0], m[1], m[2], relu);
  } else {
    if (!weight && (m[1] || m[2])) weight = onednn_weight();
    if (!data && m[0]) data = onednn_data();
    pick = std::make_unique<SplitBwdKernel>(std::move(weight), std::move(data));
  }
  return std::make_unique<ChosenKernel>(std::move(pick), std::move(choices));
}

// bfloat16: oneDNN's backward, one kernel for the parts output_mask asks
// for, each part's implementation reported as a choice.
std::unique_ptr<Kernel> bf16_bwd(const ConvGeom& g, const ConvLayouts& l,
                                 const std::vector<bool>& m, bool relu) {
  auto kern = std::make_unique<ConvBwdKernel>(g, l, m[0], m[1], m[2], relu);
  std::vector<KernelChoice> choices;
  if (m[0])
    choices.push_back(only_choice("conv_dgrad bf16 " + geom_key(g) + (relu ? " +relu_mask" : ""),
                                  "onednn " + kern->data_impl()));
  if (m[1] || m[2])
    choices.push_back(only_choice("conv_wgrad bf16 " + geom_key(g) + (m[2] ? " +bias" : ""),
                                  "onednn " + kern->weight_impl()));
  return std::make_unique<ChosenKernel>(std::move(kern), std::move(choices));
}

template <bool RELU>
std::unique_ptr<Kernel> make_conv_bwd(const KernelCtx& k) {
  const DType dt = k.node.input(1).dtype;
  if (bf16_via_float32(k, dt)) return via_float32(k);
  if (k.node.attr_bool("transposed")) return conv_transpose::make_bwd(k);
  std::vector<bool> m = conv_output_mask(k.node);
  try {
    if (dt == DType::F64)
      return std::make_unique<Conv64BwdKernel>(conv_geom(k.node, 1, 2), m[0], m[1], m[2], RELU,
                                               k.threads);
    ConvLayouts l;
    l.dst = port_layout(k.node, false, 0, k.node.input(0));
    l.src = port_layout(k.node, false, 1, k.node.input(1));
    l.dsrc = port_layout(k.node, true, 0, k.node.input(1));
    l.dt = dnnl_type(dt);
    const ConvGeom g = conv_geom(k.node, 1, 2);
    if (dt == DType::BF16) {
      if ((m[0] || m[1]) && l.src == Layout::ChannelsLast && l.dst == Layout::ChannelsLast &&
          (!m[0] || l.dsrc == Layout::ChannelsLast) && winograd_bf16_available() &&
          winograd_bf16_suits(g) && winograd_worth_timing(g)) {
        const LazyCandidate data{
            "winograd", [&] { return make_winograd_bf16_bwd_data(g, RELU, k.threads); }};
        const LazyCandidate weight{
            "winograd", [&] { return make_winograd_bf16_bwd_weight(g, m[2], k.threads); }};
        return choose_bwd(k, g, l, m, RELU, m[0] ? &data : nullptr, m[1] ? &weight : nullptr);
      }
      return bf16_bwd(g, l, m, RELU);
    }
    if (m[1] && one_channel_wgrad_suits(g, l.dst)) {
      const LazyCandidate weight{"one_channel",
                                 [&] { return make_one_channel_wgrad(g, l.dst, m[2], k.threads); }};
      return choose_bwd(k, g, l, m, RELU, nullptr, &weight);
    }
    if (m[1] && depthwise_suits(g)) {
      const LazyCandidate weight{
          "depthwise", [&] { return make_depthwise_wgrad(g, l.src, l.dst, m[2], k.threads); }};
      return choose_bwd(k, g, l, m, RELU, nullptr, &weight);
    }
    if ((m[0] || m[1]) && l.src == l.dst && (!m[0] || l.dsrc == l.dst) &&
        winograd_suits(g, l.dst) && winograd_worth_timing(g)) {
      const LazyCandidate data{"winograd",
                               [&] { return make_winograd_bwd_data(g, l.dst, RELU, k.threads); }};
      const LazyCandidate weight{
          "winograd", [&] { return make_winograd_bwd_weight(g, l.dst, m[2], k.threads); }};
      return choose_bwd(k, g, l, m, RELU, m[0] ? &data : nullptr, m[1] ? &weight : nullptr);
    }
    return std::make_unique<ConvBwdKernel>(g, l, m[0], m[1], m[2], RELU);
  } catch (const dnnl::error& e) {
    k.node.fail(std::string("oneDNN could not build the convolution backward: ") + e.what());
  }
}

}  // namespace

// A spatial attribute (stride, padding, dilation) as (h, w): a 2-D
// convolution takes 1 or 2 values, a 1-D one exactly 1 (h gets `one_d_h`).
void conv_attr_hw(const NodeCtx& ctx, const std::string& k, int nd, int64_t one_d_h, int64_t& h,
                  int64_t& w) {
  if (nd == 2) return ctx.attr_pair(k, h, w);
  std::vector<int64_t> v = ctx.attr_ints(k);
  if (v.size() != 1)
    ctx.fail("attribute '" + k + "' must have 1 value for a 1-D convolution, got " +
             std::to_string(v.size()));
  h = one_d_h;
  w = v[0];
}

// (h, w) as "HxW" for 2-D, "W" for 1-D.
std::string hw_str(int nd, int64_t h, int64_t w) {
  return nd == 1 ? std::to_string(w) : dims_str(h, w);
}

std::vector<bool> conv_output_mask(const NodeCtx& ctx) {
  std::vector<bool> m = ctx.attr_bools("output_mask");
  if (m.size() != 3) ctx.fail("attribute 'output_mask' must have 3 bools, got " + std::to_string(m.size()));
  return m;
}

void register_conv_ops(OpRegistry& r) {
  // 2-D, not transposed (ops/conv_transpose.h): src/dst blocked; the
  // backward's grad_output, src and grad_input; the relu-masked backward
  // applies x's mask to grad_input element by element, so they share one.
  const LayoutCaps fwd_layouts{{in_port(0), out_port(0)}, {}, conv_takes_blocked_relu, true};
  const LayoutCaps bwd_layouts{{in_port(0), in_port(1), out_port(0)}, {}, conv_takes_blocked_relu, true};
  LayoutCaps relu_bwd_layouts = bwd_layouts;
  relu_bwd_layouts.same = {{in_port(1), out_port(0)}};
  OpDef conv{opname::convolution,
             "1-D or 2-D convolution, float32 (oneDNN, or Winograd F(2x2,3x3) for blocked 3x3 "
             "stride-1 or our depthwise kernel where it measures faster), bfloat16 (oneDNN) or "
             "float64 (im2col + GEMM) "
             "NCL/NCHW input, "
             "OIL/OIHW weight, optional bias; stride/padding/dilation/groups; transposed=true "
             "(float32 on oneDNN deconvolution, float64 on im2col + GEMM; weight (C_in, C_out/groups, "
             "k...), output_padding) "
             "takes plain layouts; otherwise 2-D input/output may be channel-blocked (float32) or "
             "channels-last (bfloat16) (in_layouts/out_layouts, set by the plan_layouts pass)",
             infer_conv, make_conv<false>};
  conv.layouts = fwd_layouts;
  conv.fuse_role = FuseRole::Conv;
  conv.relu_fused = "trainstep.conv2d_relu";
  conv.bf16 = Bf16::Native;
  r.add(std::move(conv));
  OpDef conv_relu{"trainstep.conv2d_relu",
                  "relu(convolution) in one kernel (oneDNN's eltwise_relu post-op, or the "
                  "Winograd output transform); inputs and "
                  "attrs as aten.convolution.default; NaN propagates as in aten.relu (made by the "
                  "fuse_conv_relu pass)",
                  infer_conv, make_conv<true>};
  conv_relu.layouts = fwd_layouts;
  conv_relu.bf16 = Bf16::Native;
  r.add(std::move(conv_relu));
  OpDef bwd{opname::convolution_backward,
            "Gradients of 1-D or 2-D convolution w.r.t. input, weight and bias per output_mask; "
            "float32 (oneDNN; a blocked 3x3 stride-1 input gradient may run as Winograd "
            "F(2x2,3x3), a depthwise weight gradient on our own kernel, where it measures faster), "
            "bfloat16 (oneDNN; with AVX512_BF16 a channels-last 3x3 stride-1 input and weight "
            "gradient may run as bf16 Winograd F(2x2,3x3), where it measures faster) or float64 "
            "(im2col + GEMM); "
            "transposed=true: "
            "float32 on oneDNN "
            "deconvolution, float64 on im2col + GEMM, plain layouts; otherwise float32 2-D grad_output, input and grad_input "
            "may be channel-blocked (plan_layouts)",
            infer_conv_bwd, make_conv_bwd<false>};
  bwd.layouts = bwd_layouts;
  // Transposed convolutions have no fused relu form.
  bwd.relu_backward_fusable = [](const NodeCtx& n, const TensorType&) {
    return conv_takes_blocked_relu(n.attrs());
  };
  bwd.fuse_role = FuseRole::ConvBackward;
  bwd.relu_fused = "trainstep.conv_backward_relu";
  bwd.bf16 = Bf16::Native;
  r.add(std::move(bwd));
  OpDef relu_bwd{"trainstep.conv_backward_relu",
                 "aten.convolution_backward whose grad_input is also masked by the relu that "
                 "made the input x: where(x <= 0, 0, grad_input); may write grad_input over x "
                 "(made by the fuse_relu_backward pass)",
                 infer_conv_bwd_relu, make_conv_bwd<true>};
  relu_bwd.overwrites_input = 1;
  relu_bwd.layouts = relu_bwd_layouts;
  relu_bwd.bf16 = Bf16::Native;
  r.add(std::move(relu_bwd));
}

}  // namespace ts

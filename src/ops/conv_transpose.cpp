// Transposed convolution, 1-D and 2-D, forward and backward: float32 on
// oneDNN's deconvolution primitives, float64 on conv.cpp's im2col + GEMM
// kernels over the dual direct convolution (conv64_transposed_fwd). conv.cpp registers the ops
// (aten.convolution.default, aten.convolution_backward.default) and hands
// nodes with transposed=true to the functions here.
//
// Geometry: input (N, C_in, H, W), weight in torch's transposed layout
// (C_in, C_out/groups, kH, kW), output (N, C_out, OH, OW) with
// OH = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1.
// oneDNN's deconvolution weight is (C_out, C_in, kH, kW), grouped
// (G, C_out/G, C_in/G, kH, kW); torch's bytes are that tensor in the
// physical order (G, C_in/G, C_out/G, kH, kW), i.e. oneDNN's iohw / giohw
// tags, so the weight is described in place (the primitive may still ask
// for its own layout: then a reorder into a buffer made at compile time).
// oneDNN's sizes use padding_l / padding_r: padding_l = padding,
// padding_r = padding - output_padding (possibly negative).
// 1-D runs as 2-D with H = kH = 1 (the same bytes).
//
// Plain layouts only, no fused relu form (conv_takes_blocked_relu).
#include "ops/conv_transpose.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/dnnl_util.h"
#include "ops/layout.h"
#include "ops/parallel.h"

namespace ts {

bool conv_attrs_transposed(const json& attrs) {
  if (!attrs.is_object()) return false;
  auto it = attrs.find("transposed");
  return it != attrs.end() && it->is_boolean() && it->get<bool>();
}

bool conv_takes_blocked_relu(const json& attrs) { return !conv_attrs_transposed(attrs); }

TensorType conv_grad_weight_type(const TensorType& weight, bool requested) {
  if (requested || weight.shape.size() != 3) return weight;
  const Shape& w = weight.shape;
  return {weight.dtype, {w[0], w[1], 1, w[2]}};
}

namespace conv_transpose {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

struct Geom {
  int nd = 2;  // spatial dims
  int64_t N, IC, H, W, OC, KH, KW, G, OH, OW;
  int64_t sh, sw, ph, pw, dh, dw, oph, opw;
  // oneDNN's padding_r (padding - output_padding) and the output extent
  // (VH, VW) <= (OH, OW) that the primitive computes. oneDNN refuses
  // padding_r <= -stride (output_padding >= stride + padding, which torch
  // allows when output_padding < dilation); the rows (columns) past the
  // input's reach are then bias only, so the primitive runs with
  // padding_r = 0 over the leading (VH, VW) part of the output, a strided
  // view, and the kernels fill the tail with the bias (and add the tail of
  // grad_output to grad_bias).
  int64_t prh, prw, VH, VW;
  bool tail() const { return VH < OH || VW < OW; }
};

Geom geom(const NodeCtx& ctx, int in_i, int w_i) {
  const TensorType& x = ctx.input(in_i);
  const TensorType& w = ctx.input(w_i);
  if (x.dtype != w.dtype || !dtype_is_float(x.dtype))
    ctx.fail("input and weight must both be float32, both float64 or both bfloat16, got input " + x.str() +
             " and weight " + w.str());
  if (x.shape.size() != 3 && x.shape.size() != 4)
    ctx.fail("input must be rank 3 (N, C, L) or rank 4 (N, C, H, W), got " + x.str());
  Geom g;
  g.nd = static_cast<int>(x.shape.size()) - 2;
  const bool d1 = g.nd == 1;
  if (w.shape.size() != x.shape.size())
    ctx.fail(std::string("weight must be ") +
             (d1 ? "rank 3 (C_in, C_out/groups, kL)" : "rank 4 (C_in, C_out/groups, kH, kW)") +
             " for input " + x.str() + ", got " + w.str());
  g.N = x.shape[0], g.IC = x.shape[1], g.H = d1 ? 1 : x.shape[2], g.W = x.shape[d1 ? 2 : 3];
  g.KH = d1 ? 1 : w.shape[2], g.KW = w.shape[d1 ? 2 : 3];
  g.G = ctx.attr_int("groups");
  conv_attr_hw(ctx, "stride", g.nd, 1, g.sh, g.sw);
  conv_attr_hw(ctx, "padding", g.nd, 0, g.ph, g.pw);
  conv_attr_hw(ctx, "dilation", g.nd, 1, g.dh, g.dw);
  conv_attr_hw(ctx, "output_padding", g.nd, 0, g.oph, g.opw);
  auto hw = [&](int64_t a, int64_t b) { return hw_str(g.nd, a, b); };
  if (g.G < 1) ctx.fail("groups must be positive, got " + std::to_string(g.G));
  if (g.sh < 1 || g.sw < 1) ctx.fail("stride must be positive, got " + hw(g.sh, g.sw));
  if (g.dh < 1 || g.dw < 1) ctx.fail("dilation must be positive, got " + hw(g.dh, g.dw));
  if (g.ph < 0 || g.pw < 0) ctx.fail("padding must be non-negative, got " + hw(g.ph, g.pw));
  if (g.oph < 0 || g.opw < 0)
    ctx.fail("output_padding must be non-negative, got " + hw(g.oph, g.opw));
  if ((g.oph >= g.sh && g.oph >= g.dh) || (g.opw >= g.sw && g.opw >= g.dw))
    ctx.fail("output_padding must be smaller than stride or dilation, got output_padding " +
             hw(g.oph, g.opw) + " with stride " + hw(g.sh, g.sw) + " and dilation " +
             hw(g.dh, g.dw));
  if (w.shape[0] != g.IC)
    ctx.fail("input has " + std::to_string(g.IC) + " channels but transposed weight " + w.str() +
             " (C_in, C_out/groups, ...) expects " + std::to_string(w.shape[0]));
  if (g.IC % g.G != 0)
    ctx.fail("input channels (" + std::to_string(g.IC) + ") must be divisible by groups (" +
             std::to_string(g.G) + ")");
  if (__builtin_mul_overflow(w.shape[1], g.G, &g.OC))
    ctx.fail("output channels " + std::to_string(w.shape[1]) + " * groups " +
             std::to_string(g.G) + " overflow int64");
  // (size - 1) * stride - 2 pad + dil (k - 1) + output_padding + 1, overflow-checked.
  auto out = [&](int64_t size, int64_t st, int64_t pad, int64_t dil, int64_t k, int64_t op) {
    int64_t a, p, d, n;
    if (__builtin_mul_overflow(size - 1, st, &a) || __builtin_mul_overflow(pad, 2, &p) ||
        __builtin_mul_overflow(dil, k - 1, &d) || __builtin_sub_overflow(a, p, &n) ||
        __builtin_add_overflow(n, d, &n) || __builtin_add_overflow(n, op + 1, &n))
      ctx.fail("stride " + hw(g.sh, g.sw) + ", padding " + hw(g.ph, g.pw) + " and dilation " +
               hw(g.dh, g.dw) + " overflow int64");
    return n;
  };
  if (g.N < 1 || g.IC < 1 || g.H < 1 || g.W < 1 || g.OC < 1 || g.KH < 1 || g.KW < 1)
    ctx.fail("empty input " + x.str() + " or weight " + w.str() + " is not supported");
  g.OH = out(g.H, g.sh, g.ph, g.dh, g.KH, g.oph);
  g.OW = out(g.W, g.sw, g.pw, g.dw, g.KW, g.opw);
  if (g.OH < 1 || g.OW < 1)
    ctx.fail("output size is not positive: input " + x.str() + ", weight " + w.str() +
             ", stride " + hw(g.sh, g.sw) + ", padding " + hw(g.ph, g.pw) + ", dilation " +
             hw(g.dh, g.dw) + ", output_padding " + hw(g.oph, g.opw) + " give output " +
             hw(g.OH, g.OW));
  g.prh = g.ph - g.oph, g.prw = g.pw - g.opw;
  g.VH = g.OH, g.VW = g.OW;
  if (g.prh <= -g.sh) g.VH = g.OH + g.prh, g.prh = 0;
  if (g.prw <= -g.sw) g.VW = g.OW + g.prw, g.prw = 0;
  if (g.VH < 1 || g.VW < 1)
    ctx.fail("the input reaches no output element (every one would be the bias alone): input " +
             x.str() + ", weight " + w.str() + ", padding " + hw(g.ph, g.pw) + ", dilation " +
             hw(g.dh, g.dw) + ", output_padding " + hw(g.oph, g.opw) + " are not supported");
  return g;
}

Shape out_shape(const Geom& g) {
  return g.nd == 1 ? Shape{g.N, g.OC, g.OW} : Shape{g.N, g.OC, g.OH, g.OW};
}

// Every port plain: these kernels do not read or write blocked layouts.
void check_plain(const NodeCtx& ctx, const std::vector<TensorType>& outs) {
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && port_layout(ctx, false, i, ctx.input(i)) != Layout::Plain)
      ctx.fail("input " + std::to_string(i) +
               " must be plain: transposed convolution takes plain layouts only");
  for (int j = 0; j < static_cast<int>(outs.size()); ++j)
    if (port_layout(ctx, true, j, outs[j]) != Layout::Plain)
      ctx.fail("output " + std::to_string(j) +
               " must be plain: transposed convolution takes plain layouts only");
}

struct Mds {
  memory::desc src, wei, bias, dst;  // as stored: NCHW, torch's weight, (OC)
  memory::desc src_any, wei_any, dst_any;
  memory::dims strides, dil, pad_l, pad_r;
};

Mds mds(const Geom& g) {
  Mds m;
  memory::dims src{g.N, g.IC, g.H, g.W}, dst{g.N, g.OC, g.VH, g.VW};
  memory::dims wei = g.G == 1 ? memory::dims{g.OC, g.IC, g.KH, g.KW}
                              : memory::dims{g.G, g.OC / g.G, g.IC / g.G, g.KH, g.KW};
  m.src = memory::desc(src, f32, tag::nchw);
  // The leading (VH, VW) part of the NCHW output (all of it without a tail).
  m.dst = memory::desc(dst, f32, memory::dims{g.OC * g.OH * g.OW, g.OH * g.OW, g.OW, 1});
  m.wei = memory::desc(wei, f32, g.G == 1 ? tag::iohw : tag::giohw);
  m.bias = memory::desc({g.OC}, f32, tag::x);
  m.src_any = memory::desc(src, f32, tag::any);
  m.dst_any = memory::desc(dst, f32, tag::any);
  m.wei_any = memory::desc(wei, f32, tag::any);
  m.strides = {g.sh, g.sw};
  m.dil = {g.dh - 1, g.dw - 1};
  m.pad_l = {g.ph, g.pw};
  m.pad_r = {g.prh, g.prw};
  return m;
}

dnnl::deconvolution_forward::primitive_desc fwd_pd(const Mds& m, bool bias,
                                                   const dnnl::primitive_attr& attr) {
  using DF = dnnl::deconvolution_forward;
  auto a = dnnl::algorithm::deconvolution_direct;
  auto pk = dnnl::prop_kind::forward_training;
  auto d = bias ? DF::desc(pk, a, m.src_any, m.wei_any, m.bias, m.dst_any, m.strides, m.dil,
                           m.pad_l, m.pad_r)
                : DF::desc(pk, a, m.src_any, m.wei_any, m.dst_any, m.strides, m.dil, m.pad_l,
                           m.pad_r);
  return DF::primitive_desc(d, attr, cpu_engine());
}

// Calls f(p, n) for each run of n contiguous tail elements (outside the
// leading (VH, VW) part) of the (OH, OW) plane at p.
template <class T, class F>
void for_tail(const Geom& g, T* p, F&& f) {
  for (int64_t oh = 0; oh < g.VH; ++oh)
    if (g.VW < g.OW) f(p + oh * g.OW + g.VW, g.OW - g.VW);
  if (g.VH < g.OH) f(p + g.VH * g.OW, (g.OH - g.VH) * g.OW);
}

bool tail_parallel(const Geom& g) { return g.N * g.OC * g.OH * g.OW > (1 << 15); }

// The tail of each (n, oc) plane of y: the bias (0 without one).
void fill_tail(const Geom& g, float* y, const float* b) {
  parallel_for(g.N * g.OC, tail_parallel(g), [&](int64_t i) {
    const float v = b ? b[i % g.OC] : 0.f;
    for_tail(g, y + i * g.OH * g.OW, [v](float* p, int64_t n) { std::fill(p, p + n, v); });
  });
}

// db[oc] += the sum of grad_output's tail over every sample.
void add_tail_bias_grad(const Geom& g, const float* dy, float* db) {
  parallel_for(g.OC, tail_parallel(g), [&](int64_t oc) {
    double s = 0;
    for (int64_t n = 0; n < g.N; ++n)
      for_tail(g, dy + (n * g.OC + oc) * g.OH * g.OW, [&s](const float* p, int64_t k) {
                 for (int64_t i = 0; i < k; ++i) s += p[i];
               });
    db[oc] += static_cast<float>(s);
  });
}

class FwdKernel : public Kernel {
 public:
  FwdKernel(const Geom& g, bool bias) : g_(g), bias_(bias) {
    Mds m = mds(g);
    auto pd = fwd_pd(m, bias, user_scratchpad_attr());
    src_ = DnnlPort(m.src, pd.src_desc(), true);
    wei_ = DnnlPort(m.wei, pd.weights_desc(), true);
    dst_ = DnnlPort(m.dst, pd.dst_desc(), false);
    step_.prim = dnnl::deconvolution_forward(pd);
    step_.bind(DNNL_ARG_SRC, src_.inner);
    step_.bind(DNNL_ARG_WEIGHTS, wei_.inner);
    step_.bind(DNNL_ARG_DST, dst_.inner);
    if (bias) {
      bmem_ = plain_memory(m.bias);
      step_.bind(DNNL_ARG_BIAS, bmem_);
    }
    bind_scratchpad(step_, pd.scratchpad_desc());
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    src_.set(in[0].data);
    wei_.set(in[1].data);
    dst_.set(out[0].data);
    if (bias_) bmem_.set_data_handle(in[2].data);
    src_.sync();
    wei_.sync();
    step_.exec();
    dst_.sync();
    if (g_.tail()) fill_tail(g_, out[0].as<float>(), bias_ ? in[2].as<float>() : nullptr);
  }

 private:
  Geom g_;
  bool bias_;
  DnnlPort src_, wei_, dst_;
  memory bmem_;
  DnnlStep step_;
};

// grad_input via deconvolution_backward_data; grad_weight (and grad_bias)
// via deconvolution_backward_weights; both hinted by the forward pd.
class BwdKernel : public Kernel {
 public:
  BwdKernel(const Geom& g, bool want_in, bool want_w, bool want_b) : g_(g) {
    Mds m = mds(g);
    auto attr = user_scratchpad_attr();
    auto hint = fwd_pd(m, want_b, attr);
    auto a = dnnl::algorithm::deconvolution_direct;
    if (want_in) {
      using BD = dnnl::deconvolution_backward_data;
      BD::desc d(a, m.src_any, m.wei_any, m.dst_any, m.strides, m.dil, m.pad_l, m.pad_r);
      BD::primitive_desc pd(d, attr, cpu_engine(), hint);
      dd_data_ = DnnlPort(m.dst, pd.diff_dst_desc(), true);
      wei_ = DnnlPort(m.wei, pd.weights_desc(), true);
      dsrc_ = DnnlPort(m.src, pd.diff_src_desc(), false);
      data_.prim = BD(pd);
      data_.bind(DNNL_ARG_DIFF_DST, dd_data_.inner);
      data_.bind(DNNL_ARG_WEIGHTS, wei_.inner);
      data_.bind(DNNL_ARG_DIFF_SRC, dsrc_.inner);
      bind_scratchpad(data_, pd.scratchpad_desc());
    }
    if (want_w || want_b) {
      using BW = dnnl::deconvolution_backward_weights;
      auto d = want_b ? BW::desc(a, m.src_any, m.wei_any, m.bias, m.dst_any, m.strides, m.dil,
                                 m.pad_l, m.pad_r)
                      : BW::desc(a, m.src_any, m.wei_any, m.dst_any, m.strides, m.dil, m.pad_l,
                                 m.pad_r);
      BW::primitive_desc pd(d, attr, cpu_engine(), hint);
      src_ = DnnlPort(m.src, pd.src_desc(), true);
      dwei_ = DnnlPort(m.wei, pd.diff_weights_desc(), false);
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
    }
    has_data_ = want_in;
    has_wgt_ = want_w || want_b;
    has_bias_ = want_b;
  }

  void run(const Tensor* in, Tensor* out) override {
    const bool do_data = has_data_ && out[0].data;
    const bool do_w = has_wgt_ && (out[1].data || (has_bias_ && out[2].data));
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
      if (has_bias_ && out[2].data && g_.tail())
        add_tail_bias_grad(g_, in[0].as<float>(), out[2].as<float>());
    }
    if (do_data) {
      wei_.set(in[2].data);
      wei_.sync();
      dsrc_.set(out[0].data);
      data_.exec();
      dsrc_.sync();
    }
  }

 private:
  Geom g_;
  bool has_data_ = false, has_wgt_ = false, has_bias_ = false, share_dd_ = false;
  DnnlPort dd_data_, wei_, dsrc_;  // backward data
  DnnlPort dd_wei_, src_, dwei_;   // backward weights
  memory dbias_, spare_b_, spare_w_;
  DnnlStep data_, wgt_;
};

}  // namespace

std::vector<TensorType> infer_fwd(const NodeCtx& ctx) {
  if (ctx.op() != opname::convolution)
    ctx.fail("transposed convolution has no fused relu form");
  Geom g = geom(ctx, 0, 1);
  const DType dt = ctx.input(0).dtype;
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.input(2);
    if (b.dtype != dt || b.shape != Shape{g.OC})
      ctx.fail(std::string("bias must be ") + dtype_name(dt) + "[" + std::to_string(g.OC) +
               "], got " + b.str());
  }
  std::vector<TensorType> outs{{dt, out_shape(g)}};
  check_plain(ctx, outs);
  return outs;
}

// The direct convolution whose input gradient is this transposed one
// (conv64_transposed_fwd, conv_transpose.h).
static ConvGeom dual(const Geom& g) {
  ConvGeom d;
  d.nd = g.nd;
  d.N = g.N, d.C = g.OC, d.H = g.OH, d.W = g.OW;
  d.O = g.IC, d.KH = g.KH, d.KW = g.KW, d.G = g.G, d.OH = g.H, d.OW = g.W;
  d.sh = g.sh, d.sw = g.sw, d.ph = g.ph, d.pw = g.pw, d.dh = g.dh, d.dw = g.dw;
  return d;
}

std::unique_ptr<Kernel> make_fwd(const KernelCtx& k) {
  if (k.node.input(0).dtype == DType::F64)
    return conv64_transposed_fwd(dual(geom(k.node, 0, 1)), k.node.has_input(2), k.threads);
  try {
    return std::make_unique<FwdKernel>(geom(k.node, 0, 1), k.node.has_input(2));
  } catch (const dnnl::error& e) {
    k.node.fail(std::string("oneDNN could not build the transposed convolution: ") + e.what());
  }
}

std::vector<TensorType> infer_bwd(const NodeCtx& ctx) {
  if (ctx.op() != opname::convolution_backward)
    ctx.fail("transposed convolution has no fused relu form");
  ctx.expect_inputs(3);
  Geom g = geom(ctx, 1, 2);
  conv_output_mask(ctx);
  const TensorType& go = ctx.input(0);
  const DType dt = ctx.input(1).dtype;
  const Shape want = out_shape(g);
  if (go.dtype != dt || go.shape != want)
    ctx.fail(std::string("grad_output must be ") + dtype_name(dt) + shape_str(want) + ", got " +
             go.str());
  std::vector<TensorType> outs{ctx.input(1), conv_grad_weight_type(ctx.input(2), conv_output_mask(ctx)[1]),
                               {dt, {g.OC}}};
  check_plain(ctx, outs);
  return outs;
}

std::unique_ptr<Kernel> make_bwd(const KernelCtx& k) {
  std::vector<bool> m = conv_output_mask(k.node);
  if (k.node.input(1).dtype == DType::F64)
    return conv64_transposed_bwd(dual(geom(k.node, 1, 2)), m[0], m[1], m[2], k.threads);
  try {
    return std::make_unique<BwdKernel>(geom(k.node, 1, 2), m[0], m[1], m[2]);
  } catch (const dnnl::error& e) {
    k.node.fail(std::string("oneDNN could not build the transposed convolution backward: ") +
                e.what());
  }
}

}  // namespace conv_transpose
}  // namespace ts

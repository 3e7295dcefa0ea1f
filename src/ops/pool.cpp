// 2-D max pooling with PyTorch's index format (flat h*W+w within each input
// plane), hand-written so indices match exactly. Parallel over N*C planes.
// Windows that tile the input (kernel == stride, no padding or dilation, the
// common 2x2/2 case) take a branch-free fast path with the same results.
// float64 runs the general path (and its backward); the code pair that the
// fuse_relu_backward pass makes is float32, or bfloat16 where windows do
// not overlap (pool_code.cpp).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "ops/isa_target.h"
#include "ops/layout.h"
#include "ops/op.h"
#include "ops/parallel.h"
#include "ops/pool.h"
#include "trainstep/bfloat16.h"

namespace ts {
namespace {

// PyTorch's pooling_output_shape: floor or ceil division, and with ceil_mode
// the last window must start inside the input or the left padding.
// Overflow-checked (the attributes are untrusted): false when an
// intermediate leaves int64.
bool out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode, int64_t& o) {
  int64_t span, num;
  if (__builtin_mul_overflow(d, k - 1, &span) || __builtin_mul_overflow(pad, 2, &num) ||
      __builtin_add_overflow(num, in, &num) || __builtin_sub_overflow(num, span, &num) ||
      __builtin_sub_overflow(num, 1, &num) || __builtin_add_overflow(num, ceil_mode ? s - 1 : 0, &num))
    return false;
  int64_t q = num / s;
  if (num % s != 0 && num < 0) --q;  // floor division
  o = q + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) --o;
  return true;
}

std::string pair_str(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

}  // namespace

PoolGeom max_pool_geom(const NodeCtx& ctx, const TensorType& x) {
  if (!dtype_is_float(x.dtype))
    ctx.fail("only float32, float64 and bfloat16 are supported, got " + x.str());
  if (x.shape.size() != 4 && x.shape.size() != 3)
    ctx.fail("input must be rank 3 (C, H, W) or 4 (N, C, H, W), got " + x.str());
  PoolGeom g;
  ctx.attr_pair("kernel_size", g.kh, g.kw);
  g.sh = g.kh, g.sw = g.kw;
  ctx.attr_pair("stride", g.sh, g.sw, true);
  ctx.attr_pair("padding", g.ph, g.pw);
  ctx.attr_pair("dilation", g.dh, g.dw);
  bool ceil_mode = ctx.attr_bool("ceil_mode");
  if (g.kh < 1 || g.kw < 1) ctx.fail("kernel_size must be positive, got " + pair_str(g.kh, g.kw));
  if (g.sh < 1 || g.sw < 1) ctx.fail("stride must be positive, got " + pair_str(g.sh, g.sw));
  if (g.dh < 1 || g.dw < 1) ctx.fail("dilation must be positive, got " + pair_str(g.dh, g.dw));
  if (g.ph < 0 || g.pw < 0 || g.ph > g.kh / 2 || g.pw > g.kw / 2)
    ctx.fail("padding must be between 0 and half the kernel size, got padding " +
             pair_str(g.ph, g.pw) + " for kernel " + pair_str(g.kh, g.kw));
  size_t r = x.shape.size();
  g.H = x.shape[r - 2], g.W = x.shape[r - 1];
  g.planes = 1;
  for (size_t i = 0; i + 2 < r; ++i) g.planes *= x.shape[i];
  if (!out_size(g.H, g.kh, g.ph, g.sh, g.dh, ceil_mode, g.OH) ||
      !out_size(g.W, g.kw, g.pw, g.sw, g.dw, ceil_mode, g.OW))
    ctx.fail("kernel " + pair_str(g.kh, g.kw) + ", padding " + pair_str(g.ph, g.pw) + ", dilation " +
             pair_str(g.dh, g.dw) + " and stride " + pair_str(g.sh, g.sw) + " overflow int64");
  if (g.OH < 1 || g.OW < 1 || g.H < 1 || g.W < 1)
    ctx.fail("output size is not positive: input " + x.str() + ", kernel " +
             pair_str(g.kh, g.kw) + ", padding " + pair_str(g.ph, g.pw) + ", dilation " +
             pair_str(g.dh, g.dw) + " give output " + pair_str(g.OH, g.OW));
  g.out_shape = x.shape;
  g.out_shape[r - 2] = g.OH;
  g.out_shape[r - 1] = g.OW;
  return g;
}

namespace {

std::vector<TensorType> infer_fwd(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  PoolGeom g = max_pool_geom(ctx, ctx.input(0));
  return {{ctx.input(0).dtype, g.out_shape}, {DType::I64, g.out_shape}};
}

// bfloat16 runs plane by plane through float32 in the thread's scratch (a
// plane fits in cache, where whole-tensor conversions would not): a max is
// one of its inputs, and a gradient scattered into a plane sums in float32
// and rounds once, as torch computes bfloat16 pooling.
class Bf16PoolKernel : public Kernel {
 public:
  Bf16PoolKernel(const PoolGeom& g, bool backward, int threads, std::string where)
      : g_(g), one_(g), backward_(backward), nthr_(threads > 0 ? threads : omp_get_max_threads()),
        where_(std::move(where)),
        scratch_(static_cast<size_t>(nthr_) * (g.H * g.W + g.OH * g.OW) * sizeof(float)) {
    one_.planes = 1;
    tiled_ = pool_detail::max_pool_tiles(one_);
  }

  void run(const Tensor* in, Tensor* out) override {
    if (backward_) return run_bwd(in, out);
    if (!out[0].data && !out[1].data) return;
    const uint16_t* x = in[0].as<uint16_t>();
    uint16_t* y = out[0].as<uint16_t>();
    int64_t* idx = out[1].as<int64_t>();
    const int64_t n_in = g_.H * g_.W, n_out = g_.OH * g_.OW;
    for_planes([&](int64_t p, float* xs, float* ys) {
      bf16_to_floats(x + p * n_in, xs, n_in);
      int64_t* ip = idx ? idx + p * n_out : nullptr;
      if (tiled_ && y)
        pool_detail::max_pool_tiled(one_, xs, ys, ip);
      else
        pool_detail::max_pool_general(one_, xs, y ? ys : nullptr, ip);
      if (y) floats_to_bf16(ys, y + p * n_out, n_out);
    });
  }

 private:
  void run_bwd(const Tensor* in, Tensor* out) {
    uint16_t* gi = out[0].as<uint16_t>();
    if (!gi) return;
    const uint16_t* go = in[0].as<uint16_t>();
    const int64_t* idx = in[2].as<int64_t>();
    const int64_t n_in = g_.H * g_.W, n_out = g_.OH * g_.OW;
    // Indices come from the graph: checked before the parallel loop.
    for (int64_t o = 0; o < g_.planes * n_out; ++o)
      if (idx[o] < 0 || idx[o] >= n_in)
        fail(where_ + ": index " + std::to_string(idx[o]) + " is out of bounds for an input plane of " +
             std::to_string(n_in) + " elements");
    for_planes([&](int64_t p, float* acc, float* gs) {
      std::fill_n(acc, n_in, 0.0f);
      bf16_to_floats(go + p * n_out, gs, n_out);
      const int64_t* ip = idx + p * n_out;
      for (int64_t o = 0; o < n_out; ++o) acc[ip[o]] += gs[o];
      floats_to_bf16(acc, gi + p * n_in, n_in);
    });
  }

  // f(plane, input-plane floats, output-plane floats), planes split over
  // the threads, each with its own scratch.
  template <class F>
  void for_planes(F&& f) {
    const int64_t n_in = g_.H * g_.W, n_out = g_.OH * g_.OW;
    const bool par = g_.planes > 1 && g_.planes * n_in > (1 << 15);  // below, a fork costs more
    parallel_region(par, [&](int t, int nt) {
      float* a = static_cast<float*>(scratch_.data()) + static_cast<int64_t>(t) * (n_in + n_out);
      int64_t p0, p1;
      split_range(g_.planes, t, nt, p0, p1);
      for (int64_t p = p0; p < p1; ++p) f(p, a, a + n_in);
    }, nthr_);
  }

  PoolGeom g_, one_;
  bool backward_, tiled_ = false;
  int nthr_;
  std::string where_;
  Buffer scratch_;
};

std::unique_ptr<Kernel> make_fwd(const KernelCtx& k) {
  PoolGeom g = max_pool_geom(k.node, k.node.input(0));
  if (k.node.input(0).dtype == DType::BF16)
    return std::make_unique<Bf16PoolKernel>(g, false, k.threads, "");
  if (k.node.input(0).dtype == DType::F64)
    return make_fn_kernel([g](const Tensor* in, Tensor* out) {
      if (!out[0].data && !out[1].data) return;
      pool_detail::max_pool_general_t(g, in[0].as<double>(), out[0].as<double>(),
                                      out[1].as<int64_t>());
    });
  bool tiled = pool_detail::max_pool_tiles(g);
  return make_fn_kernel([g, tiled](const Tensor* in, Tensor* out) {
    if (!out[0].data && !out[1].data) return;
    float* y = out[0].as<float>();
    int64_t* idx = out[1].as<int64_t>();
    if (tiled && y)
      pool_detail::max_pool_tiled(g, in[0].as<float>(), y, idx);
    else
      pool_detail::max_pool_general(g, in[0].as<float>(), y, idx);
  });
}

std::vector<TensorType> infer_bwd(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  const TensorType& x = ctx.input(1);
  PoolGeom g = max_pool_geom(ctx, x);
  const TensorType& go = ctx.input(0);
  const TensorType& ix = ctx.input(2);
  if (go.dtype != x.dtype || go.shape != g.out_shape)
    ctx.fail("grad_output must be " + std::string(dtype_name(x.dtype)) + shape_str(g.out_shape) +
             ", got " + go.str());
  if (ix.dtype != DType::I64 || ix.shape != g.out_shape)
    ctx.fail("indices must be int64" + shape_str(g.out_shape) + ", got " + ix.str());
  return {x};
}

template <class T>
std::unique_ptr<Kernel> make_bwd_t(const KernelCtx& k) {
  PoolGeom g = max_pool_geom(k.node, k.node.input(1));
  const std::string where = "node '" + k.node.node() + "' (" + k.node.op() + ")";
  return make_fn_kernel([g, where](const Tensor* in, Tensor* out) {
    T* gi = out[0].as<T>();
    if (!gi) return;
    const T* go = in[0].as<T>();
    const int64_t* idx = in[2].as<int64_t>();
    int64_t n_in = g.H * g.W, n_out = g.OH * g.OW;
    // Indices come from the graph: a program may pass any. Checked before
    // the parallel loop (an exception must not leave an OpenMP region).
    bool ok = true;
    for (int64_t o = 0; o < g.planes * n_out; ++o) ok &= (idx[o] >= 0) & (idx[o] < n_in);
    if (!ok)
      for (int64_t o = 0; o < g.planes * n_out; ++o)
        if (idx[o] < 0 || idx[o] >= n_in)
          fail(where + ": index " + std::to_string(idx[o]) + " is out of bounds for an input plane of " +
               std::to_string(n_in) + " elements");
    parallel_for(g.planes, true, [&](int64_t p) {
      T* gp = gi + p * n_in;
      for (int64_t i = 0; i < n_in; ++i) gp[i] = T(0);
      for (int64_t o = p * n_out; o < (p + 1) * n_out; ++o) gp[idx[o]] += go[o];
    });
  });
}

std::unique_ptr<Kernel> make_bwd(const KernelCtx& k) {
  if (k.node.input(1).dtype == DType::BF16)
    return std::make_unique<Bf16PoolKernel>(max_pool_geom(k.node, k.node.input(1)), true, k.threads,
                                            "node '" + k.node.node() + "' (" + k.node.op() + ")");
  return k.node.input(1).dtype == DType::F64 ? make_bwd_t<double>(k) : make_bwd_t<float>(k);
}

// The pair the compiler puts in place of relu -> max_pool2d_with_indices and
// its backward (passes/fuse_relu_backward.h). The forward keeps one byte per
// window instead of the relu output and int64 indices: bits 0-6 the
// argmax's offset in the (unclipped) window, row-major, found by the same
// rule as the general path, bit 7 set when the gradient passes the relu,
// i.e. unless the window's max is <= 0. The backward scatters grad_output
// with it: where(x <= 0, 0, max-pool backward). Windows that tile the input
// into plain values run the kernels above; any other geometry or layout
// runs pool_code.cpp's.

PoolGeom code_geom(const NodeCtx& ctx, const TensorType& x) {
  if (x.dtype != DType::F32 && x.dtype != DType::BF16)
    ctx.fail("only float32 and bfloat16 are supported, got " + x.str());
  PoolGeom g = max_pool_geom(ctx, x);
  if (g.kh * g.kw > 128) ctx.fail("windows of more than 128 elements do not fit a byte code");
  if (x.dtype == DType::BF16 && pool_detail::windows_overlap(g))
    ctx.fail("bfloat16 windows must not overlap (each gradient is copied, not added)");
  return g;
}

// The channel count of a rank-4 value (the blocked layouts' planes).
int64_t channels(const TensorType& x) { return x.shape.size() == 4 ? x.shape[1] : 1; }

// plane_at's block for a port: channels-last is one block of all C.
int64_t plane_block(Layout l, const TensorType& x) {
  return l == Layout::ChannelsLast ? channels(x) : layout_block(l);
}

// The input and the values may be channel-blocked (plan_layouts, between
// convolutions); codes are always plain (N, C, OH, OW).
std::vector<TensorType> infer_code_fwd(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  PoolGeom g = code_geom(ctx, ctx.input(0));
  TensorType y{ctx.input(0).dtype, g.out_shape};
  check_layout_ports(ctx, {0}, {0});
  port_layout(ctx, false, 0, ctx.input(0));
  port_layout(ctx, true, 0, y);
  return {y, {DType::U8, g.out_shape}};
}

std::unique_ptr<Kernel> make_code_fwd(const KernelCtx& k) {
  const TensorType& x = k.node.input(0);
  PoolGeom g = code_geom(k.node, x);
  if (x.dtype == DType::BF16) {
    const int64_t C = channels(x);
    const int64_t xb = plane_block(port_layout(k.node, false, 0, x), x);
    const int64_t yb = plane_block(port_layout(k.node, true, 0, k.outputs[0]), x);
    return make_fn_kernel([g, xb, yb, C](const Tensor* in, Tensor* out) {
      uint16_t* y = out[0].as<uint16_t>();
      uint8_t* code = out[1].as<uint8_t>();
      if (!y || !code) fail("trainstep.max_pool2d_code: both outputs are needed");
      pool_detail::max_pool_code_any(g, C, xb, yb, in[0].as<uint16_t>(), y, code);
    });
  }
  const int64_t block = layout_block(port_layout(k.node, false, 0, x));
  const int64_t y_block = layout_block(port_layout(k.node, true, 0, k.outputs[0]));
  const bool fast = pool_detail::max_pool_tiles(g) && y_block == 1;
  const int64_t C = channels(x);
  return make_fn_kernel([g, block, y_block, fast, C](const Tensor* in, Tensor* out) {
    float* y = out[0].as<float>();
    uint8_t* code = out[1].as<uint8_t>();
    if (!y || !code) fail("trainstep.max_pool2d_code: both outputs are needed");
    if (!fast)
      pool_detail::max_pool_code_any(g, C, block, y_block, in[0].as<float>(), y, code);
    else if (block > 1)
      pool_detail::max_pool_blocked_code(g, block, in[0].as<float>(), y, code);
    else
      pool_detail::max_pool_tiled_code(g, in[0].as<float>(), y, code);
  });
}

// The input's shape: grad_output's with the last two dims from input_size.
TensorType code_bwd_input(const NodeCtx& ctx) {
  const TensorType& go = ctx.input(0);
  int64_t H, W;
  ctx.attr_pair("input_size", H, W);
  if (go.shape.size() < 3) ctx.fail("grad_output must be rank 3 or 4, got " + go.str());
  TensorType x{go.dtype, go.shape};
  x.shape[x.shape.size() - 2] = H;
  x.shape[x.shape.size() - 1] = W;
  return x;
}

std::vector<TensorType> infer_code_bwd(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  TensorType x = code_bwd_input(ctx);
  PoolGeom g = code_geom(ctx, x);
  const TensorType& go = ctx.input(0);
  const TensorType& code = ctx.input(1);
  if (go.shape != g.out_shape)  // its dtype is x's, checked by code_geom
    ctx.fail("grad_output must be " + std::string(dtype_name(go.dtype)) + shape_str(g.out_shape) +
             ", got " + go.str());
  if (code.dtype != DType::U8 || code.shape != g.out_shape)
    ctx.fail("code must be uint8" + shape_str(g.out_shape) + ", got " + code.str());
  check_layout_ports(ctx, {0}, {0});
  port_layout(ctx, false, 0, go);
  port_layout(ctx, true, 0, x);
  return {x};
}

std::unique_ptr<Kernel> make_code_bwd(const KernelCtx& k) {
  const TensorType x = code_bwd_input(k.node);
  PoolGeom g = code_geom(k.node, x);
  if (x.dtype == DType::BF16) {
    const int64_t C = channels(x);
    const int64_t ib = plane_block(port_layout(k.node, true, 0, x), x);
    const int64_t gb = plane_block(port_layout(k.node, false, 0, k.node.input(0)), x);
    const std::string where = "node '" + k.node.node() + "' (" + k.node.op() + ")";
    return make_fn_kernel([g, ib, gb, C, where](const Tensor* in, Tensor* out) {
      if (!out[0].data) return;
      const int64_t bad = pool_detail::max_pool_code_any_backward(
          g, C, gb, ib, in[0].as<uint16_t>(), in[1].as<uint8_t>(), out[0].as<uint16_t>());
      if (bad)
        fail(where + ": " + std::to_string(bad) + " window codes name no element of the input "
             "(input 1 must be the codes trainstep.max_pool2d_code made)");
    });
  }
  const int64_t block = layout_block(port_layout(k.node, true, 0, x));
  const int64_t go_block = layout_block(port_layout(k.node, false, 0, k.node.input(0)));
  if (!pool_detail::max_pool_tiles(g) || go_block > 1) {
    const int64_t C = channels(x);
    const std::string where = "node '" + k.node.node() + "' (" + k.node.op() + ")";
    return make_fn_kernel([g, block, go_block, C, where](const Tensor* in, Tensor* out) {
      if (!out[0].data) return;
      const int64_t bad = pool_detail::max_pool_code_any_backward(
          g, C, go_block, block, in[0].as<float>(), in[1].as<uint8_t>(), out[0].as<float>());
      if (bad)
        fail(where + ": " + std::to_string(bad) + " window codes name no element of the input "
             "(input 1 must be the codes trainstep.max_pool2d_code made)");
    });
  }
  if (block > 1)
    return make_fn_kernel([g, block](const Tensor* in, Tensor* out) {
      if (!out[0].data) return;
      pool_detail::max_pool_blocked_code_backward(g, block, in[0].as<float>(),
                                                  in[1].as<uint8_t>(), out[0].as<float>());
    });
  // A code's offset within the window, as an offset in the plane.
  std::array<int64_t, 128> at_offset{};
  for (int64_t a = 0; a < g.kh * g.kw; ++a) at_offset[a] = (a / g.kw) * g.W + a % g.kw;
  return make_fn_kernel([g, at_offset](const Tensor* in, Tensor* out) {
    float* gi = out[0].as<float>();
    if (!gi) return;
    const float* go = in[0].as<float>();
    const uint8_t* code = in[1].as<uint8_t>();
    parallel_for(g.planes, true, [&](int64_t p) {
      float* gp = gi + p * g.H * g.W;
      std::fill(gp, gp + g.H * g.W, 0.f);
      const int64_t o0 = p * g.OH * g.OW;
      // Without branches: the argmax always gets a store, 0 when the relu
      // blocks (it is already 0).
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t o = o0 + oh * g.OW + ow;
          const int c = code[o];
          gp[oh * g.kh * g.W + ow * g.kw + at_offset[c & (pool_detail::kCodePass - 1)]] =
              c & pool_detail::kCodePass ? go[o] : 0.f;
        }
    });
  });
}



}  // namespace

namespace pool_detail {

// The first of a0, a0 + d, a0 + 2d, ... that is >= 0, in one step: a loop
// takes padding / dilation steps, 2^39 for a hostile padding of 2^39.
int64_t first_in_bounds(int64_t a0, int64_t d) {
  if (a0 >= 0) return a0;
  const int64_t n = -a0;
  return a0 + (n / d + (n % d != 0)) * d;
}

// Same loop as PyTorch's CPU kernel: the window is clipped to the input, the
// first max wins (strict >), and any NaN is taken as the max.
template <class T>
void max_pool_general_t(const PoolGeom& g, const T* x, T* y, int64_t* idx) {
  parallel_for(g.planes, true, [&](int64_t p) {
    const T* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t h0 = oh * g.sh - g.ph;
      int64_t h1 = std::min(h0 + (g.kh - 1) * g.dh + 1, g.H);
      h0 = first_in_bounds(h0, g.dh);
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t w0 = ow * g.sw - g.pw;
        int64_t w1 = std::min(w0 + (g.kw - 1) * g.dw + 1, g.W);
        w0 = first_in_bounds(w0, g.dw);
        int64_t best_i = h0 * g.W + w0;
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t h = h0; h < h1; h += g.dh)
          for (int64_t w = w0; w < w1; w += g.dw) {
            T v = xp[h * g.W + w];
            if (v > best || std::isnan(v)) {
              best = v;
              best_i = h * g.W + w;
            }
          }
        int64_t o = p * g.OH * g.OW + oh * g.OW + ow;
        if (y) y[o] = best;
        if (idx) idx[o] = best_i;
      }
    }
  });
}

template void max_pool_general_t<double>(const PoolGeom&, const double*, double*, int64_t*);

void max_pool_general(const PoolGeom& g, const float* x, float* y, int64_t* idx) {
  max_pool_general_t<float>(g, x, y, idx);
}

bool max_pool_tiles(const PoolGeom& g) {
  return g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 && g.kh == g.sh && g.kw == g.sw &&
         g.OH * g.kh <= g.H && g.OW * g.kw <= g.W;
}

namespace {

// One output row of a tiling pool. Scans each window row-major with the
// general path's rule (a larger value or any NaN replaces the max) written
// as selects, so there are no data-dependent branches and the 2x2 case
// vectorises. KH/KW = 0: sizes known only at run time.
template <int KH, int KW>
void tiled_row(const float* xp, int64_t W, int64_t kh, int64_t kw, int64_t oh, int64_t OW,
               float* y, int64_t* idx) {
  if (KH) kh = KH;
  if (KW) kw = KW;
  const int64_t row0 = oh * kh * W;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t first = row0 + ow * kw;
    float m = xp[first];
    int64_t bi = first;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t at = first + i * W + j;
        const float v = xp[at];
        const bool take = v > m || v != v;
        m = take ? v : m;
        bi = take ? at : bi;
      }
    y[ow] = m;
    if (idx) idx[ow] = bi;
  }
}

}  // namespace

#if TS_X86
// Lanes where q replaces p in the scan: strictly larger, or NaN.
TS_AVX512 __mmask16 later16(__m512 p, __m512 q) {
  return static_cast<__mmask16>(_mm512_cmp_ps_mask(q, p, _CMP_GT_OQ) |
                                _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q));
}

// One plane of 2x2 windows, 16 outputs of a row per step: the row pair is split
// into even and odd columns (a b / c d per window), then the max of (a, b),
// of (c, d), and of those two, each keeping the later value only if it is
// strictly larger or NaN. That is the same value and index as the row-major
// scan a, b, c, d of the general path. Masked loads and stores: no over-read.
TS_AVX512 void pool2x2_plane_avx512(const float* xp, int64_t W, int64_t OH, int64_t OW, float* y,
                                    int64_t* idx, uint8_t* code) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i step2 = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i one = _mm512_set1_epi64(1), wv = _mm512_set1_epi64(W);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i i32_one = _mm512_set1_epi32(1), i32_two = _mm512_set1_epi32(2),
                i32_pass = _mm512_set1_epi32(kCodePass);
  for (int64_t oh = 0; oh < OH; ++oh, y += OW, idx = idx ? idx + OW : nullptr,
               code = code ? code + OW : nullptr)
  for (int64_t ow = 0; ow < OW; ow += 16) {
    const float* r0 = xp + 2 * oh * W;
    const float* r1 = r0 + W;
    const int64_t base = 2 * oh * W;
    const int64_t n = std::min<int64_t>(16, OW - ow);
    const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xffffu : (1u << (2 * n)) - 1);
    const __mmask16 hi = static_cast<__mmask16>(n <= 8 ? 0u : (1u << (2 * n - 16)) - 1);
    const float* p0 = r0 + 2 * ow;
    const float* p1 = r1 + 2 * ow;
    __m512 t0 = _mm512_maskz_loadu_ps(lo, p0), t1 = _mm512_maskz_loadu_ps(hi, p0 + 16);
    __m512 b0 = _mm512_maskz_loadu_ps(lo, p1), b1 = _mm512_maskz_loadu_ps(hi, p1 + 16);
    __m512 a = _mm512_permutex2var_ps(t0, even, t1), b = _mm512_permutex2var_ps(t0, odd, t1);
    __m512 c = _mm512_permutex2var_ps(b0, even, b1), d = _mm512_permutex2var_ps(b0, odd, b1);
    __mmask16 kt = later16(a, b), kb = later16(c, d);
    __m512 top = _mm512_mask_blend_ps(kt, a, b), bot = _mm512_mask_blend_ps(kb, c, d);
    __mmask16 kv = later16(top, bot);
    const __m512 m = _mm512_mask_blend_ps(kv, top, bot);
    _mm512_mask_storeu_ps(y + ow, keep, m);
    __mmask16 kcol = static_cast<__mmask16>((kv & kb) | (~kv & kt));
    if (code) {  // row * 2 + column, | 0x80 unless the max is <= 0 (NaN passes)
      __m512i c = _mm512_maskz_mov_epi32(kcol, i32_one);
      c = _mm512_mask_add_epi32(c, kv, c, i32_two);
      c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(m, zero, _CMP_NLE_UQ), c, i32_pass);
      _mm512_mask_cvtepi32_storeu_epi8(code + ow, keep, c);
    }
    for (int half = 0; half < 2 && idx; ++half) {
      __mmask8 v = static_cast<__mmask8>(kv >> (8 * half));
      __mmask8 col = static_cast<__mmask8>(kcol >> (8 * half));
      __mmask8 st = static_cast<__mmask8>(keep >> (8 * half));
      if (!st) break;
      __m512i i = _mm512_add_epi64(_mm512_set1_epi64(base + 2 * (ow + 8 * half)), step2);
      i = _mm512_mask_add_epi64(i, col, i, one);
      i = _mm512_mask_add_epi64(i, v, i, wv);
      _mm512_mask_storeu_epi64(idx + ow + 8 * half, st, i);
    }
  }
}

// Lanes where q replaces p (all bits set): strictly larger, or NaN.
TS_AVX2 __m256 later8(__m256 p, __m256 q) {
  return _mm256_or_ps(_mm256_cmp_ps(q, p, _CMP_GT_OQ), _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
}

// The even and odd elements of u then v: shuffle_ps picks within 128-bit
// halves, permute4x64 puts the halves in order.
TS_AVX2 __m256 even8(__m256 u, __m256 v) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(u, v, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
}
TS_AVX2 __m256 odd8(__m256 u, __m256 v) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(
      _mm256_castps_pd(_mm256_shuffle_ps(u, v, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
}

// One plane of 2x2 windows on AVX2, 8 outputs of a row per step as in
// pool2x2_plane_avx512 (even and odd columns split by shuffles); the last
// OW % 8 windows of a row by the row-major scan itself.
TS_AVX2 void pool2x2_plane_avx2(const float* xp, int64_t W, int64_t OH, int64_t OW, float* y,
                                int64_t* idx, uint8_t* code) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t oh = 0; oh < OH; ++oh, y += OW, idx = idx ? idx + OW : nullptr,
               code = code ? code + OW : nullptr) {
    const int64_t base = 2 * oh * W;
    const float* r0 = xp + base;
    const float* r1 = r0 + W;
    int64_t ow = 0;
    for (; ow + 8 <= OW; ow += 8) {
      const __m256 t0 = _mm256_loadu_ps(r0 + 2 * ow), t1 = _mm256_loadu_ps(r0 + 2 * ow + 8);
      const __m256 b0 = _mm256_loadu_ps(r1 + 2 * ow), b1 = _mm256_loadu_ps(r1 + 2 * ow + 8);
      const __m256 a = even8(t0, t1), b = odd8(t0, t1), c = even8(b0, b1), d = odd8(b0, b1);
      const __m256 kt = later8(a, b), kb = later8(c, d);
      const __m256 top = _mm256_blendv_ps(a, b, kt), bot = _mm256_blendv_ps(c, d, kb);
      const __m256 kv = later8(top, bot);
      const __m256 m = _mm256_blendv_ps(top, bot, kv);
      _mm256_storeu_ps(y + ow, m);
      const int v = _mm256_movemask_ps(kv);
      const int col = _mm256_movemask_ps(_mm256_or_ps(_mm256_and_ps(kv, kb), _mm256_andnot_ps(kv, kt)));
      const int pos = _mm256_movemask_ps(_mm256_cmp_ps(m, zero, _CMP_NLE_UQ));
      for (int l = 0; l < 8; ++l) {
        const int cl = col >> l & 1, vl = v >> l & 1;
        if (idx) idx[ow + l] = base + 2 * (ow + l) + cl + (vl ? W : 0);
        if (code) code[ow + l] = static_cast<uint8_t>(cl + 2 * vl + (pos >> l & 1 ? kCodePass : 0));
      }
    }
    for (; ow < OW; ++ow) {
      const int64_t first = base + 2 * ow;
      const int64_t at[4] = {first, first + 1, first + W, first + W + 1};
      float m = xp[first];
      int best = 0;
      for (int j = 1; j < 4; ++j) {
        const float u = xp[at[j]];
        if (u > m || u != u) m = u, best = j;
      }
      y[ow] = m;
      if (idx) idx[ow] = at[best];
      if (code) code[ow] = static_cast<uint8_t>(best | (m <= 0.f ? 0 : kCodePass));
    }
  }
}

#endif

namespace {

// One output row of code pooling; KH/KW = 0: sizes known only at run time.
template <int KH, int KW>
void code_row(const float* xp, int64_t W, int64_t kh, int64_t kw, int64_t oh, int64_t OW,
              float* y, uint8_t* code) {
  if (KH) kh = KH;
  if (KW) kw = KW;
  const float* row = xp + oh * kh * W;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const float* win = row + ow * kw;
    float m = win[0];
    int best = 0;
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const float v = win[i * W + j];
        const bool take = v > m || v != v;  // a larger value or any NaN
        m = take ? v : m;
        best = take ? static_cast<int>(i * kw + j) : best;
      }
    y[ow] = m;
    code[ow] = static_cast<uint8_t>(best | (m <= 0.f ? 0 : kCodePass));
  }
}

}  // namespace

void max_pool_tiled_code(const PoolGeom& g, const float* x, float* y, uint8_t* code) {
#if TS_X86
  if (g.kh == 2 && g.kw == 2 && cpu_isa() >= CpuIsa::Avx2) {
    auto plane = cpu_isa() == CpuIsa::Avx512 ? &pool2x2_plane_avx512 : &pool2x2_plane_avx2;
    parallel_for(g.planes, true, [&](int64_t p) {
      int64_t o = p * g.OH * g.OW;
      plane(x + p * g.H * g.W, g.W, g.OH, g.OW, y + o, nullptr, code + o);
    });
    return;
  }
#endif
  auto row = g.kh == 2 && g.kw == 2 ? &code_row<2, 2> : &code_row<0, 0>;
  parallel_for(g.planes, true, [&](int64_t p) {
    const float* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t o = (p * g.OH + oh) * g.OW;
      row(xp, g.W, g.kh, g.kw, oh, g.OW, y + o, code + o);
    }
  });
}

#if TS_X86
// nw 2x2 windows of a 16-channel block, one window per step: the window's
// four 16-lane vectors a b / c d reduce as in pool2x2_plane_avx512 (later
// value kept only if strictly larger or NaN), giving the same value and
// code as the scalar scan. m and code get 16 lanes per window.
TS_AVX512 void pool2x2_block16(const float* row, int64_t W, int64_t nw, float* m, uint8_t* code) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2),
                pass = _mm512_set1_epi32(kCodePass);
  for (int64_t t = 0; t < nw; ++t) {
    const float* p0 = row + t * 32;
    const float* p1 = p0 + W * 16;
    __m512 a = _mm512_loadu_ps(p0), b = _mm512_loadu_ps(p0 + 16);
    __m512 c = _mm512_loadu_ps(p1), d = _mm512_loadu_ps(p1 + 16);
    __mmask16 kt = later16(a, b), kb = later16(c, d);
    __m512 top = _mm512_mask_blend_ps(kt, a, b), bot = _mm512_mask_blend_ps(kb, c, d);
    __mmask16 kv = later16(top, bot);
    const __m512 mx = _mm512_mask_blend_ps(kv, top, bot);
    _mm512_storeu_ps(m + t * 16, mx);
    __mmask16 kcol = static_cast<__mmask16>((kv & kb) | (~kv & kt));
    __m512i k = _mm512_maskz_mov_epi32(kcol, one);
    k = _mm512_mask_add_epi32(k, kv, k, two);
    k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(mx, zero, _CMP_NLE_UQ), k, pass);
    _mm512_mask_cvtepi32_storeu_epi8(code + t * 16, 0xffff, k);
  }
}

// Its backward: each of a window's four positions gets the gradient in the
// lanes whose code names it with the relu passing, else 0.
TS_AVX512 void unpool2x2_block16(const float* g, const uint8_t* code, int64_t nw, int64_t W, float* row) {
  for (int64_t t = 0; t < nw; ++t) {
    const __m512 gv = _mm512_loadu_ps(g + t * 16);
    const __m512i c = _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(code + t * 16)));
    float* p0 = row + t * 32;
    float* p1 = p0 + W * 16;
    float* at[4] = {p0, p0 + 16, p1, p1 + 16};
    for (int a = 0; a < 4; ++a)
      _mm512_storeu_ps(at[a], _mm512_maskz_mov_ps(
                                  _mm512_cmpeq_epi32_mask(c, _mm512_set1_epi32(a | kCodePass)), gv));
  }
}

// The AVX2 pair for 8-channel blocks (oneDNN's block on AVX2 machines), the
// same reduction with compare vectors for masks.
TS_AVX2 void pool2x2_block8(const float* row, int64_t W, int64_t nw, float* m, uint8_t* code) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2),
                pass = _mm256_set1_epi32(kCodePass);
  for (int64_t t = 0; t < nw; ++t) {
    const float* p0 = row + t * 16;
    const float* p1 = p0 + W * 8;
    __m256 a = _mm256_loadu_ps(p0), b = _mm256_loadu_ps(p0 + 8);
    __m256 c = _mm256_loadu_ps(p1), d = _mm256_loadu_ps(p1 + 8);
    __m256 kt = later8(a, b), kb = later8(c, d);
    __m256 top = _mm256_blendv_ps(a, b, kt), bot = _mm256_blendv_ps(c, d, kb);
    __m256 kv = later8(top, bot);
    const __m256 mx = _mm256_blendv_ps(top, bot, kv);
    _mm256_storeu_ps(m + t * 8, mx);
    const __m256i kcol = _mm256_castps_si256(_mm256_or_ps(_mm256_and_ps(kv, kb), _mm256_andnot_ps(kv, kt)));
    __m256i k = _mm256_and_si256(kcol, one);
    k = _mm256_or_si256(k, _mm256_and_si256(_mm256_castps_si256(kv), two));
    k = _mm256_or_si256(k, _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(mx, zero, _CMP_NLE_UQ)), pass));
    alignas(32) int32_t kk[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(kk), k);
    for (int l = 0; l < 8; ++l) code[t * 8 + l] = static_cast<uint8_t>(kk[l]);
  }
}

TS_AVX2 void unpool2x2_block8(const float* g, const uint8_t* code, int64_t nw, int64_t W, float* row) {
  for (int64_t t = 0; t < nw; ++t) {
    const __m256 gv = _mm256_loadu_ps(g + t * 8);
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(code + t * 8)));
    float* p0 = row + t * 16;
    float* p1 = p0 + W * 8;
    float* at[4] = {p0, p0 + 8, p1, p1 + 8};
    for (int a = 0; a < 4; ++a)
      _mm256_storeu_ps(at[a], _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(
                                                c, _mm256_set1_epi32(a | kCodePass))), gv));
  }
}
#endif

// Channel-blocked input: x is (N, C/B, H, W, B). Each block of B planes is
// pooled together, lane l being plane q*B + l, with the scan of code_row
// (first max wins, NaN taken) per lane. A row of windows is computed lane-
// wise into (OW, B) tiles, then transposed into the B plain output planes.
template <int B>
void blocked_code(const PoolGeom& g, const float* x, float* y, uint8_t* code) {
  const int64_t plane_out = g.OH * g.OW;
  parallel_for(g.planes / B, true, [&](int64_t q) {
    const float* xq = x + q * g.H * g.W * B;
    float* yq = y + q * B * plane_out;
    uint8_t* cq = code + q * B * plane_out;
    constexpr int64_t kTile = 64;  // windows per tile: a B x 64 transpose stays in L1
    float mt[kTile * B];
    uint8_t ct[kTile * B];
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow0 = 0; ow0 < g.OW; ow0 += kTile) {
        const int64_t nw = std::min(kTile, g.OW - ow0);
#if TS_X86
        if (B == 16 && g.kh == 2 && g.kw == 2 && cpu_isa() == CpuIsa::Avx512) {
          pool2x2_block16(xq + oh * 2 * g.W * B + ow0 * 2 * B, g.W, nw, mt, ct);
        } else if (B == 8 && g.kh == 2 && g.kw == 2 && cpu_isa() >= CpuIsa::Avx2) {
          pool2x2_block8(xq + oh * 2 * g.W * B + ow0 * 2 * B, g.W, nw, mt, ct);
        } else
#endif
        for (int64_t t = 0; t < nw; ++t) {
          const float* win = xq + (oh * g.kh * g.W + (ow0 + t) * g.kw) * B;
          float* m = mt + t * B;
          int best[B];
          for (int l = 0; l < B; ++l) m[l] = win[l], best[l] = 0;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const float* v = win + (i * g.W + j) * B;
              const int a = static_cast<int>(i * g.kw + j);
              for (int l = 0; l < B; ++l) {
                const bool take = v[l] > m[l] || v[l] != v[l];
                m[l] = take ? v[l] : m[l];
                best[l] = take ? a : best[l];
              }
            }
          for (int l = 0; l < B; ++l)
            ct[t * B + l] = static_cast<uint8_t>(best[l] | (m[l] <= 0.f ? 0 : kCodePass));
        }
        const int64_t o = oh * g.OW + ow0;
        for (int l = 0; l < B; ++l)
          for (int64_t t = 0; t < nw; ++t) {
            yq[l * plane_out + o + t] = mt[t * B + l];
            cq[l * plane_out + o + t] = ct[t * B + l];
          }
      }
  });
}

template <int B>
void blocked_code_backward(const PoolGeom& g, const float* go, const uint8_t* code, float* gi) {
  const int64_t plane_out = g.OH * g.OW;
  // Every input element lies in a window unless the windows leave a margin.
  const bool covered = g.OH * g.kh == g.H && g.OW * g.kw == g.W;
  parallel_for(g.planes / B, true, [&](int64_t q) {
    float* gq = gi + q * g.H * g.W * B;
    const float* goq = go + q * B * plane_out;
    const uint8_t* cq = code + q * B * plane_out;
    if (!covered) std::fill(gq, gq + g.H * g.W * B, 0.f);
    constexpr int64_t kTile = 64;
    float gt[kTile * B];
    uint8_t ct[kTile * B];
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow0 = 0; ow0 < g.OW; ow0 += kTile) {
        const int64_t nw = std::min(kTile, g.OW - ow0);
        const int64_t o = oh * g.OW + ow0;
        for (int l = 0; l < B; ++l)
          for (int64_t t = 0; t < nw; ++t) {
            gt[t * B + l] = goq[l * plane_out + o + t];
            ct[t * B + l] = cq[l * plane_out + o + t];
          }
#if TS_X86
        if (B == 16 && g.kh == 2 && g.kw == 2 && cpu_isa() == CpuIsa::Avx512) {
          unpool2x2_block16(gt, ct, nw, g.W, gq + oh * 2 * g.W * B + ow0 * 2 * B);
        } else if (B == 8 && g.kh == 2 && g.kw == 2 && cpu_isa() >= CpuIsa::Avx2) {
          unpool2x2_block8(gt, ct, nw, g.W, gq + oh * 2 * g.W * B + ow0 * 2 * B);
        } else
#endif
        for (int64_t t = 0; t < nw; ++t) {
          float* win = gq + (oh * g.kh * g.W + (ow0 + t) * g.kw) * B;
          const float* gv = gt + t * B;
          const uint8_t* cv = ct + t * B;
          // Each window position gets the gradient where it held the max
          // and the relu passed, else 0: a full write, no zeroing needed.
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              float* w = win + (i * g.W + j) * B;
              const int a = static_cast<int>(i * g.kw + j) | kCodePass;
              for (int l = 0; l < B; ++l) w[l] = cv[l] == a ? gv[l] : 0.f;
            }
        }
      }
  });
}

void max_pool_blocked_code(const PoolGeom& g, int64_t block, const float* x, float* y,
                           uint8_t* code) {
  if (block == 16)
    blocked_code<16>(g, x, y, code);
  else if (block == 8)
    blocked_code<8>(g, x, y, code);
  else
    fail("max_pool_blocked_code: unsupported channel block " + std::to_string(block));
}

void max_pool_blocked_code_backward(const PoolGeom& g, int64_t block, const float* go,
                                    const uint8_t* code, float* gi) {
  if (block == 16)
    blocked_code_backward<16>(g, go, code, gi);
  else if (block == 8)
    blocked_code_backward<8>(g, go, code, gi);
  else
    fail("max_pool_blocked_code_backward: unsupported channel block " + std::to_string(block));
}

void max_pool_tiled(const PoolGeom& g, const float* x, float* y, int64_t* idx) {
#if TS_X86
  if (g.kh == 2 && g.kw == 2 && cpu_isa() >= CpuIsa::Avx2) {
    auto plane = cpu_isa() == CpuIsa::Avx512 ? &pool2x2_plane_avx512 : &pool2x2_plane_avx2;
    parallel_for(g.planes, true, [&](int64_t p) {
      int64_t o = p * g.OH * g.OW;
      plane(x + p * g.H * g.W, g.W, g.OH, g.OW, y + o, idx ? idx + o : nullptr, nullptr);
    });
    return;
  }
#endif
  auto row = g.kh == 2 && g.kw == 2 ? &tiled_row<2, 2> : &tiled_row<0, 0>;
  parallel_for(g.planes, true, [&](int64_t p) {
    const float* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t o = (p * g.OH + oh) * g.OW;
      row(xp, g.W, g.kh, g.kw, oh, g.OW, y + o, idx ? idx + o : nullptr);
    }
  });
}

}  // namespace pool_detail

void register_pool_ops(OpRegistry& r) {
  OpDef fwd{opname::max_pool2d,
            "2-D max pooling over float32, float64 or bfloat16 (plane by plane through float32) "
            "(N,)C,H,W returning values and int64 flat h*W+w indices as PyTorch; "
            "stride/padding/dilation/ceil_mode",
            infer_fwd, make_fwd};
  // Becomes trainstep.max_pool2d_code (+ its backward) when a window's
  // offset fits the code's 7 bits: float32, or bfloat16 windows that do not
  // overlap.
  fwd.relu_backward_fusable = [](const NodeCtx& n, const TensorType& x) {
    const pool_detail::PoolGeom g = max_pool_geom(n, x);  // the node's error for invalid attrs
    return g.kh * g.kw <= 128 &&
           (x.dtype == DType::F32 || (x.dtype == DType::BF16 && !pool_detail::windows_overlap(g)));
  };
  fwd.fuse_role = FuseRole::MaxPool;
  fwd.relu_fused = "trainstep.max_pool2d_code";
  fwd.bf16 = Bf16::Native;
  r.add(std::move(fwd));
  OpDef bwd{opname::max_pool2d_backward,
            "Gradient of 2-D max pooling: scatters grad_output into a zeroed input-shaped "
            "float32, float64 or bfloat16 (summed in float32, rounded once) tensor at the saved "
            "indices",
            infer_bwd, make_bwd};
  bwd.fuse_role = FuseRole::MaxPoolBackward;
  bwd.relu_fused = "trainstep.max_pool2d_code_backward";  // what the where becomes
  bwd.bf16 = Bf16::Native;
  r.add(std::move(bwd));
  OpDef code{"trainstep.max_pool2d_code",
             "max_pool2d of float32 or bfloat16 (windows that do not overlap) (N,)C,H,W (windows "
             "of at most 128 elements), returning the values and one uint8 per window (argmax "
             "offset in the window, bit 7: max > 0 or NaN) for "
             "trainstep.max_pool2d_code_backward (created by a compiler pass); the input and the "
             "values may be channel-blocked (float32) or channels-last (bfloat16) (plan_layouts)",
             infer_code_fwd, make_code_fwd};
  code.layouts = LayoutCaps{{in_port(0), out_port(0)}, {}, nullptr, true};
  code.bf16 = Bf16::Native;
  r.add(std::move(code));
  OpDef code_bwd{"trainstep.max_pool2d_code_backward",
                 "Gradient of max_pool2d(relu(.)) w.r.t. the relu output from the window codes: "
                 "where(x <= 0, 0, max-pool backward); attr input_size [H, W] (created by a "
                 "compiler pass); float32 or bfloat16; grad_output and grad_input may be "
                 "channel-blocked (float32) or channels-last (bfloat16) (plan_layouts); "
                 "overlapping float32 windows add up",
                 infer_code_bwd, make_code_bwd};
  code_bwd.layouts = LayoutCaps{{in_port(0), out_port(0)}, {}, nullptr, true};
  code_bwd.bf16 = Bf16::Native;
  r.add(std::move(code_bwd));
}

}  // namespace ts

// aten.native_batch_norm and its backward on float32, float64 or bfloat16
// (N, C, *) tensors, viewed as [N, C, S]; per-channel work runs in parallel
// over channels.
//
// Training mode normalises with the batch's statistics: mean and biased
// variance accumulated in double in one pass, shifted by the channel's first
// element so that the pass stays accurate when |mean| >> std. It returns
// them as save_mean and save_invstd = 1/sqrt(var + eps), as PyTorch's CPU
// kernel does. Running stats are not inputs in training: eager updates them
// in place, which a functional graph cannot express, so the exporter
// (python/trainstep/patches.py) computes the update in the graph from the
// saved statistics. Eval mode normalises with running_mean / running_var and
// returns empty saves ([0], as PyTorch on CPU).
//
// float64 runs the plain kernels with every tensor float64 (plan_layouts
// lays out float32 and bfloat16 values only).
//
// bfloat16 (torch's autocast form: input, output, grad_out and grad_input
// bfloat16, every per-channel tensor float32) has its own plain kernels,
// which convert chunks of kChunk values into a stack buffer and run the
// float32 kernels' arithmetic on it: the same double sums and shift, the
// same float coefficients, and one rounding of each output value.
//
// A rank-4 float32 input may be channel-blocked (N, C/B, H, W, B)
// (plan_layouts); the blocked kernels then work on whole blocks of B
// channels, one vector lane per channel, with per-sample partial sums added
// in sample order. A rank-4 bfloat16 input may be channels-last (N, H, W, C)
// instead (batch_norm_nhwc.cpp: the same arithmetic as the plain bfloat16
// kernels, summed in another order).
//
// trainstep.batch_norm_relu (the fuse_conv_relu pass makes it from a batch
// norm whose output 0 only a relu reads) is the forward with relu applied
// to output 0 as each value is written: aten.relu's x < 0 ? 0 : x, so NaN
// and -0.0 pass through; for bfloat16, on the rounded value, which is what
// the separate relu would see.
#include <cmath>
#include <string>

#include "ops/batch_norm_nhwc.h"
#include "ops/block_sums.h"
#include "ops/bn_channel.h"
#include "ops/bn_float.h"
#include "ops/layout.h"
#include "ops/op.h"
#include "ops/parallel.h"
#include "ops/norm.h"
#include "trainstep/bfloat16.h"

namespace ts {

namespace {

// The dtype of the per-channel tensors (weight, stats, saves): the input's,
// but float32 for a bfloat16 input, as torch's mixed-type batch norm takes
// it under autocast.
DType per_channel_dtype(const TensorType& x) { return x.dtype == DType::BF16 ? DType::F32 : x.dtype; }

// The saves' dtype: per_channel_dtype, but a bfloat16 batch norm with no
// per-channel input at all (affine=False, as instance norm and a captured
// BatchNorm2d(affine=False) run it) is not torch's mixed-type path, and
// keeps them in bfloat16.
DType bn_save_dtype(const TensorType& x, bool per_channel_inputs) {
  return x.dtype == DType::BF16 && !per_channel_inputs ? DType::BF16 : per_channel_dtype(x);
}

// Checks a (N, C, *) float tensor and the optional per-channel ones (of
// per_channel_dtype).
BnGeom bn_geom(const NodeCtx& ctx, int x_i, const std::vector<std::pair<int, const char*>>& per_c) {
  const TensorType& x = ctx.input(x_i);
  if (!dtype_is_float(x.dtype))
    ctx.fail("only float32, float64 and bfloat16 are supported, got input " + x.str());
  if (x.shape.size() < 2) ctx.fail("input must have rank >= 2 (N, C, ...), got " + x.str());
  BnGeom g;
  g.N = x.shape[0];
  g.C = x.shape[1];
  for (size_t d = 2; d < x.shape.size(); ++d) g.S *= x.shape[d];
  for (auto [i, name] : per_c) {
    if (!ctx.has_input(i)) continue;
    const TensorType& t = ctx.input(i);
    if (t.dtype != per_channel_dtype(x) || t.shape != Shape{g.C})
      ctx.fail(std::string(name) + " must be " + dtype_name(per_channel_dtype(x)) + "[" + std::to_string(g.C) +
               "] for input " + x.str() + ", got " + t.str());
  }
  return g;
}

// Backward: sum of dy and of (x - mean) * dy over the channel's planes.
template <class T>
void grad_sums(const BnGeom& g, const T* dy, const T* x, int64_t c, double mean,
               double& sum_dy, double& dot) {
  sum_dy = dot = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.S;
    plane_grad_sums(dy + base, x + base, g.S, mean, sum_dy, dot);
  }
}

// ---- forward ----------------------------------------------------------------

bool bn_training(const NodeCtx& ctx) { return ctx.attr_bool("training"); }

std::vector<TensorType> infer_bn(const NodeCtx& ctx) {
  if (ctx.num_inputs() != 5)
    ctx.fail("expected inputs (input, weight?, bias?, running_mean?, running_var?), got " +
             std::to_string(ctx.num_inputs()));
  BnGeom g = bn_geom(ctx, 0, {{1, "weight"}, {2, "bias"}, {3, "running_mean"}, {4, "running_var"}});
  ctx.attr_float("eps");
  const bool running = ctx.has_input(3) || ctx.has_input(4);
  if (bn_training(ctx)) {
    if (running)
      ctx.fail("training mode with running stats would update them in place; the exporter "
               "passes none and updates them in the graph");
    if (g.M() < 2)
      ctx.fail("training mode needs more than 1 value per channel, got input " +
               ctx.input(0).str());
  } else if (!ctx.has_input(3) || !ctx.has_input(4)) {
    ctx.fail("eval mode (training=false) needs running_mean and running_var");
  }
  check_layout_ports(ctx, {0}, {0});
  if (port_layout(ctx, false, 0, ctx.input(0)) != port_layout(ctx, true, 0, ctx.input(0)))
    ctx.fail("input 0 and output 0 must have one layout");
  Shape save{bn_training(ctx) ? g.C : 0};
  const bool per_channel = ctx.has_input(1) || ctx.has_input(2) || running;
  const DType t = bn_save_dtype(ctx.input(0), per_channel);
  return {ctx.input(0), {t, save}, {t, save}};
}

template <class T>
class BnFwdKernel : public Kernel {
 public:
  BnFwdKernel(const BnGeom& g, bool training, double eps, bool relu)
      : g_(g), training_(training), eps_(eps), relu_(relu) {}

  void run(const Tensor* in, Tensor* out) override {
    const T* x = in[0].as<T>();
    const T* w = in[1].data ? in[1].as<T>() : nullptr;
    const T* b = in[2].data ? in[2].as<T>() : nullptr;
    T* y = out[0].as<T>();  // nullptr when nobody reads it (the saves may be read)
    T* save_mean = training_ ? out[1].as<T>() : nullptr;
    T* save_invstd = training_ ? out[2].as<T>() : nullptr;
    const BnGeom g = g_;
    const double M = double(g.M());
    parallel_for(g.C, g.C > 1 && g.M() * g.C > (1 << 15), [&](int64_t c) {
      double mean, invstd;
      if (training_) {
        const double shift = x[c * g.S];
        double s1, s2;
        stat_sums(g, x, c, shift, s1, s2);
        double var = std::max((s2 - s1 * s1 / M) / M, 0.0);
        mean = shift + s1 / M;
        invstd = 1.0 / std::sqrt(var + eps_);
        if (save_mean) save_mean[c] = T(mean);
        if (save_invstd) save_invstd[c] = T(invstd);
      } else {
        mean = in[3].as<T>()[c];
        invstd = 1.0 / std::sqrt(double(in[4].as<T>()[c]) + eps_);
      }
      if (!y) return;
      // y = x * alpha + beta, as PyTorch's CPU kernel applies it.
      const T alpha = T(invstd * (w ? w[c] : T(1)));
      const T beta = T((b ? b[c] : T(0)) - mean * alpha);
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t base = (n * g.C + c) * g.S;
        if (!relu_) {
          bn_apply(x + base, alpha, beta, y + base, g.S);
        } else {
          for (int64_t s = 0; s < g.S; ++s) {
            const T v = x[base + s] * alpha + beta;
            y[base + s] = v < T(0) ? T(0) : v;  // aten.relu: NaN and -0.0 pass
          }
        }
      }
    });
  }

 private:
  BnGeom g_;
  bool training_;
  double eps_;
  bool relu_;
};


// ---- bfloat16 forward and backward (plain layout) ---------------------------

// Values converted at a time: 1 KiB of floats per buffer on the stack.
constexpr int64_t kChunk = 256;

// stat_sums over bfloat16 x; the simd sums carry across chunks.
void stat_sums_bf16(const BnGeom& g, const uint16_t* x, int64_t c, double shift, double& s1,
                    double& s2) {
  float buf[kChunk];
  double a = 0, b = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const uint16_t* p = x + (n * g.C + c) * g.S;
    for (int64_t s0 = 0; s0 < g.S; s0 += kChunk) {
      const int64_t len = std::min(kChunk, g.S - s0);
      bf16_to_floats(p + s0, buf, len);
#pragma omp simd reduction(+ : a, b)
      for (int64_t s = 0; s < len; ++s) {
        const double d = double(buf[s]) - shift;
        a += d;
        b += d * d;
      }
    }
  }
  s1 = a;
  s2 = b;
}

// grad_sums over bfloat16 dy and x.
void grad_sums_bf16(const BnGeom& g, const uint16_t* dy, const uint16_t* x, int64_t c, double mean,
                    double& sum_dy, double& dot) {
  float bd[kChunk], bx[kChunk];
  double a = 0, b = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    const int64_t base = (n * g.C + c) * g.S;
    for (int64_t s0 = 0; s0 < g.S; s0 += kChunk) {
      const int64_t len = std::min(kChunk, g.S - s0);
      bf16_to_floats(dy + base + s0, bd, len);
      bf16_to_floats(x + base + s0, bx, len);
#pragma omp simd reduction(+ : a, b)
      for (int64_t s = 0; s < len; ++s) {
        const double d = bd[s];
        a += d;
        b += (double(bx[s]) - mean) * d;
      }
    }
  }
  sum_dy = a;
  dot = b;
}

// BnFwdKernel<float>'s arithmetic on a bfloat16 input and output, float32
// weight, bias, running stats and saves. Scratch lives on each thread's
// stack (kChunk floats), so run allocates nothing.
class BnFwdBf16Kernel : public Kernel {
 public:
  BnFwdBf16Kernel(const BnGeom& g, bool training, double eps, bool relu)
      : g_(g), training_(training), eps_(eps), relu_(relu) {}

  void run(const Tensor* in, Tensor* out) override {
    const uint16_t* x = in[0].as<uint16_t>();
    const float* w = in[1].data ? in[1].as<float>() : nullptr;
    const float* b = in[2].data ? in[2].as<float>() : nullptr;
    uint16_t* y = out[0].data ? out[0].as<uint16_t>() : nullptr;
    const bool save_mean = training_ && out[1].data, save_invstd = training_ && out[2].data;
    const BnGeom g = g_;
    const double M = double(g.M());
    parallel_for(g.C, g.C > 1 && g.M() * g.C > (1 << 15), [&](int64_t c) {
      double mean, invstd;
      if (training_) {
        const double shift = bf16_to_float(x[c * g.S]);
        double s1, s2;
        stat_sums_bf16(g, x, c, shift, s1, s2);
        double var = std::max((s2 - s1 * s1 / M) / M, 0.0);
        mean = shift + s1 / M;
        invstd = 1.0 / std::sqrt(var + eps_);
        if (save_mean) set_channel_value(out[1], c, mean);
        if (save_invstd) set_channel_value(out[2], c, invstd);
      } else {
        mean = in[3].as<float>()[c];
        invstd = 1.0 / std::sqrt(double(in[4].as<float>()[c]) + eps_);
      }
      if (!y) return;
      // alpha and beta in float (torch's opmath), y rounded once.
      const float alpha = float(invstd * (w ? w[c] : 1.0f));
      const float beta = float((b ? b[c] : 0.0f) - mean * alpha);
      float buf[kChunk];
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t base = (n * g.C + c) * g.S;
        for (int64_t s0 = 0; s0 < g.S; s0 += kChunk) {
          const int64_t len = std::min(kChunk, g.S - s0);
          bf16_to_floats(x + base + s0, buf, len);
          for (int64_t s = 0; s < len; ++s) buf[s] = buf[s] * alpha + beta;
          floats_to_bf16(buf, y + base + s0, len);
          if (relu_) relu_bf16(y + base + s0, len);
        }
      }
    });
  }

 private:
  BnGeom g_;
  bool training_;
  double eps_;
  bool relu_;
};

// BnBwdKernel<float>'s arithmetic on bfloat16 grad_out, input and
// grad_input, float32 weight, stats, grad_weight and grad_bias.
class BnBwdBf16Kernel : public Kernel {
 public:
  BnBwdBf16Kernel(const BnGeom& g, bool train, double eps) : g_(g), train_(train), eps_(eps) {}

  void run(const Tensor* in, Tensor* out) override {
    const uint16_t* go = in[0].as<uint16_t>();
    const uint16_t* x = in[1].as<uint16_t>();
    const float* w = in[2].data ? in[2].as<float>() : nullptr;
    uint16_t* gi = out[0].data ? out[0].as<uint16_t>() : nullptr;
    float* gw = out[1].data ? out[1].as<float>() : nullptr;
    float* gb = out[2].data ? out[2].as<float>() : nullptr;
    const BnGeom g = g_;
    const double M = double(g.M());
    parallel_for(g.C, g.C > 1 && g.M() * g.C > (1 << 15), [&](int64_t c) {
      double mean, invstd;
      if (train_) {
        mean = channel_value(in[5], c);
        invstd = channel_value(in[6], c);
      } else {
        mean = in[3].as<float>()[c];
        invstd = 1.0 / std::sqrt(double(in[4].as<float>()[c]) + eps_);
      }
      double sum_g, dotp;
      grad_sums_bf16(g, go, x, c, mean, sum_g, dotp);
      if (gw) gw[c] = float(dotp * invstd);
      if (gb) gb[c] = float(sum_g);
      if (!gi) return;
      const float scale = float(invstd * (w ? w[c] : 1.0f));
      const float mean_f = float(mean);
      const float k = train_ ? float(dotp * invstd * invstd / M) : 0.0f;
      const float gmean = train_ ? float(sum_g / M) : 0.0f;
      float bd[kChunk], bx[kChunk];
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t base = (n * g.C + c) * g.S;
        for (int64_t s0 = 0; s0 < g.S; s0 += kChunk) {
          const int64_t len = std::min(kChunk, g.S - s0);
          bf16_to_floats(go + base + s0, bd, len);
          bf16_to_floats(x + base + s0, bx, len);
          for (int64_t s = 0; s < len; ++s) bd[s] = (bd[s] - gmean - (bx[s] - mean_f) * k) * scale;
          floats_to_bf16(bd, gi + base + s0, len);
        }
      }
    });
  }

 private:
  BnGeom g_;
  bool train_;
  double eps_;
};

// ---- channel-blocked forward and backward -----------------------------------

// Both directions on (N, C/B, S, B) data. Pass 1 runs over (sample, block)
// pairs in parallel and keeps each pair's per-lane sums in double in
// `part_` (sized at compile time); the per-channel totals add the samples'
// parts in order, so results do not depend on the thread count. Pass 2
// applies the per-channel affine map over (sample, block) pairs.
class BnBlockedKernel : public Kernel {
 public:
  // relu: the forward's output goes through relu (batch_norm_relu).
  BnBlockedKernel(const BnGeom& g, int64_t B, bool backward, bool train, double eps, bool relu)
      : g_(g), B_(B), backward_(backward), train_(train), relu_(relu), eps_(eps),
        part_(static_cast<size_t>(g.N * g.C * 2)), a_(g.C), b_(g.C), k_(g.C), m_(g.C) {}

  void run(const Tensor* in, Tensor* out) override {
    if (B_ == 16) return run_b<16>(in, out);
    return run_b<8>(in, out);
  }

 private:
  template <int B>
  void run_b(const Tensor* in, Tensor* out) {
    const BnGeom g = g_;
    const BnChannelStep step{backward_, train_, eps_, double(g.M())};
    const int64_t CB = g.C / B, S = g.S, pairs = g.N * CB;
    const bool par = pairs > 1 && g.M() * g.C > (1 << 15);
    const float* x = in[backward_ ? 1 : 0].as<float>();
    const float* dy = backward_ ? in[0].as<float>() : nullptr;
    double* part = part_.data();
    // Pass 1: sums of d and d*d (forward, d = x - shift) or of dy and
    // (x - mean) * dy (backward), per (sample, channel).
    if (!backward_ && !train_) {
      // eval forward needs no statistics
    } else {
      if (!backward_)  // shift: the channel's first element, as the plain kernel
        for (int64_t c = 0; c < g.C; ++c) m_[c] = x[(c / B) * S * B + c % B];
      else
        for (int64_t c = 0; c < g.C; ++c) m_[c] = step.mean(in, c);
      parallel_for(pairs, par, [&](int64_t p) {
        const int64_t n = p / CB, cb = p % CB;
        double s1[B], s2[B];
        block_lane_sums(B, x + p * S * B, dy ? dy + p * S * B : nullptr, m_.data() + cb * B, S,
                        s1, s2);
        double* q = part + (n * g.C + cb * B) * 2;
        for (int l = 0; l < B; ++l) q[2 * l] = s1[l], q[2 * l + 1] = s2[l];
      });
    }
    // Per channel: the affine map y = x * a + b (forward) or
    // dx = (dy - gmean - (x - mean) * k) * a (backward), as the plain kernels.
    for (int64_t c = 0; c < g.C; ++c) {
      double t1 = 0, t2 = 0;
      if (backward_ || train_)
        for (int64_t n = 0; n < g.N; ++n) {
          t1 += part[(n * g.C + c) * 2];
          t2 += part[(n * g.C + c) * 2 + 1];
        }
      step(in, out, c, t1, t2, m_[c], a_[c], b_[c], k_[c]);
    }
    float* y = out[0].data ? out[0].as<float>() : nullptr;
    if (!y) return;
    parallel_for(pairs, par, [&](int64_t p) {
      const int64_t cb = p % CB;
      const float* xp = x + p * S * B;
      float* yp = y + p * S * B;
      float a[B], b[B], k[B], mf[B];
      for (int l = 0; l < B; ++l)
        a[l] = a_[cb * B + l], b[l] = b_[cb * B + l], k[l] = k_[cb * B + l],
        mf[l] = float(m_[cb * B + l]);
      if (!backward_ && !relu_) {
        bn_apply_rows<B>(a, b, xp, yp, S);
      } else if (!backward_) {
        for (int64_t s = 0; s < S; ++s)
          for (int l = 0; l < B; ++l) {
            const float v = xp[s * B + l] * a[l] + b[l];
            yp[s * B + l] = v < 0.0f ? 0.0f : v;  // aten.relu: NaN and -0.0 pass
          }
      } else {
        bn_grad_apply_rows<B>(dy + p * S * B, xp, b, mf, k, a, yp, S);
      }
    });
  }

  BnGeom g_;
  int64_t B_;
  bool backward_, train_, relu_;
  double eps_;
  std::vector<double> part_;       // (N, C, 2) partial sums
  std::vector<float> a_, b_, k_;   // per-channel coefficients
  std::vector<double> m_;          // per-channel shift (forward) or mean (backward)
};

// The forward's kernel; relu: batch_norm_relu's.
std::unique_ptr<Kernel> make_bn_fwd(const KernelCtx& k, bool relu) {
  BnGeom g = bn_geom(k.node, 0, {});
  const bool train = bn_training(k.node);
  const double eps = k.node.attr_float("eps");
  // bfloat16 first: it is plain or channels-last, which has no block.
  if (k.node.input(0).dtype == DType::BF16) {
    if (port_layout(k.node, false, 0, k.node.input(0)) == Layout::ChannelsLast)
      return make_bn_nhwc_bf16(g.N, g.C, g.S, false, train, eps, relu);
    return std::make_unique<BnFwdBf16Kernel>(g, train, eps, relu);
  }
  if (k.node.input(0).dtype == DType::F64)
    return std::make_unique<BnFwdKernel<double>>(g, train, eps, relu);
  const int64_t B = layout_block(port_layout(k.node, false, 0, k.node.input(0)));
  if (B > 1) return std::make_unique<BnBlockedKernel>(g, B, false, train, eps, relu);
  return std::make_unique<BnFwdKernel<float>>(g, train, eps, relu);
}

std::unique_ptr<Kernel> make_bn(const KernelCtx& k) { return make_bn_fwd(k, false); }
std::unique_ptr<Kernel> make_bn_relu(const KernelCtx& k) { return make_bn_fwd(k, true); }

// ---- backward ---------------------------------------------------------------

std::vector<bool> bn_mask(const NodeCtx& ctx) {
  std::vector<bool> m = ctx.attr_bools("output_mask");
  if (m.size() != 3)
    ctx.fail("attribute 'output_mask' must have 3 bools, got " + std::to_string(m.size()));
  return m;
}

std::vector<TensorType> infer_bn_bwd(const NodeCtx& ctx) {
  if (ctx.num_inputs() != 7)
    ctx.fail("expected inputs (grad_out, input, weight?, running_mean?, running_var?, "
             "save_mean?, save_invstd?), got " + std::to_string(ctx.num_inputs()));
  const bool train = ctx.attr_bool("train");
  ctx.attr_float("eps");
  bn_mask(ctx);
  // The saves are empty ([0]) in eval mode; only the mode's pair is read.
  std::vector<std::pair<int, const char*>> per_c = {{2, "weight"}};
  // The forward's saves are bfloat16 where it had no per-channel input.
  const bool bf16_saves = train && ctx.input(1).dtype == DType::BF16 && !ctx.has_input(2) &&
                          ctx.has_input(5) && ctx.input(5).dtype == DType::BF16;
  if (train && !bf16_saves)
    per_c.insert(per_c.end(), {{5, "save_mean"}, {6, "save_invstd"}});
  else if (!train)
    per_c.insert(per_c.end(), {{3, "running_mean"}, {4, "running_var"}});
  BnGeom g = bn_geom(ctx, 1, per_c);
  if (bf16_saves)
    for (int i : {5, 6})
      if (ctx.has_input(i) && ctx.input(i) != TensorType{DType::BF16, {g.C}})
        ctx.fail(std::string(i == 5 ? "save_mean" : "save_invstd") + " must be bfloat16[" +
                 std::to_string(g.C) + "] like save_mean, got " + ctx.input(i).str());
  if (train && (!ctx.has_input(5) || !ctx.has_input(6)))
    ctx.fail("training mode (train=true) needs save_mean and save_invstd");
  if (!train && (!ctx.has_input(3) || !ctx.has_input(4)))
    ctx.fail("eval mode (train=false) needs running_mean and running_var");
  if (ctx.input(0) != ctx.input(1))
    ctx.fail("grad_out " + ctx.input(0).str() + " must match input " + ctx.input(1).str());
  check_layout_ports(ctx, {0, 1}, {0});
  const Layout l = port_layout(ctx, false, 1, ctx.input(1));
  if (port_layout(ctx, false, 0, ctx.input(0)) != l || port_layout(ctx, true, 0, ctx.input(1)) != l)
    ctx.fail("grad_out, input and grad_input must have one layout");
  TensorType per{per_channel_dtype(ctx.input(1)), {g.C}};
  return {ctx.input(1), per, per};
}

template <class T>
class BnBwdKernel : public Kernel {
 public:
  BnBwdKernel(const BnGeom& g, bool train, double eps) : g_(g), train_(train), eps_(eps) {}

  void run(const Tensor* in, Tensor* out) override {
    const T* go = in[0].as<T>();
    const T* x = in[1].as<T>();
    const T* w = in[2].data ? in[2].as<T>() : nullptr;
    T* gi = out[0].data ? out[0].as<T>() : nullptr;
    T* gw = out[1].data ? out[1].as<T>() : nullptr;
    T* gb = out[2].data ? out[2].as<T>() : nullptr;
    const BnGeom g = g_;
    const double M = double(g.M());
    parallel_for(g.C, g.C > 1 && g.M() * g.C > (1 << 15), [&](int64_t c) {
      double mean, invstd;
      if (train_) {
        mean = in[5].as<T>()[c];
        invstd = in[6].as<T>()[c];
      } else {
        mean = in[3].as<T>()[c];
        invstd = 1.0 / std::sqrt(double(in[4].as<T>()[c]) + eps_);
      }
      double sum_g, dotp;
      grad_sums(g, go, x, c, mean, sum_g, dotp);
      if (gw) gw[c] = T(dotp * invstd);
      if (gb) gb[c] = T(sum_g);
      if (!gi) return;
      const T scale = T(invstd * (w ? w[c] : T(1)));
      const T mean_f = T(mean);
      const T k = train_ ? T(dotp * invstd * invstd / M) : T(0);
      const T gmean = train_ ? T(sum_g / M) : T(0);
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t base = (n * g.C + c) * g.S;
        bn_grad_apply(go + base, x + base, gmean, mean_f, k, scale, gi + base, g.S);
      }
    });
  }

 private:
  BnGeom g_;
  bool train_;
  double eps_;
};

std::unique_ptr<Kernel> make_bn_bwd(const KernelCtx& k) {
  BnGeom g = bn_geom(k.node, 1, {});
  if (k.node.input(1).dtype == DType::BF16) {  // before layout_block, as in make_bn
    if (port_layout(k.node, false, 1, k.node.input(1)) == Layout::ChannelsLast)
      return make_bn_nhwc_bf16(g.N, g.C, g.S, true, k.node.attr_bool("train"),
                                k.node.attr_float("eps"), false);
    return std::make_unique<BnBwdBf16Kernel>(g, k.node.attr_bool("train"), k.node.attr_float("eps"));
  }
  if (k.node.input(1).dtype == DType::F64)
    return std::make_unique<BnBwdKernel<double>>(g, k.node.attr_bool("train"),
                                                 k.node.attr_float("eps"));
  const int64_t B = layout_block(port_layout(k.node, false, 1, k.node.input(1)));
  if (B > 1)
    return std::make_unique<BnBlockedKernel>(g, B, true, k.node.attr_bool("train"),
                                             k.node.attr_float("eps"), false);
  return std::make_unique<BnBwdKernel<float>>(g, k.node.attr_bool("train"), k.node.attr_float("eps"));
}

}  // namespace

std::vector<TensorType> batch_norm_infer(const NodeCtx& ctx) { return infer_bn(ctx); }
std::vector<TensorType> batch_norm_backward_infer(const NodeCtx& ctx) { return infer_bn_bwd(ctx); }

void register_batch_norm_ops(OpRegistry& r) {
  // Its kernels take one layout for all the activations they touch.
  const LayoutCaps fwd_layouts{{in_port(0), out_port(0)}, {{in_port(0), out_port(0)}}, nullptr, true};
  OpDef bn{opname::batch_norm,
           "batch normalisation of float32, float64 or bfloat16 (N, C, *) over all dims but C "
           "(bfloat16: float32 weight, bias, stats and saves, but bfloat16 saves with no weight, "
           "bias or stats, as torch), optional weight/bias; "
           "training=true: batch statistics (running stats must be absent) -> (out, save_mean, "
           "save_invstd); training=false: running_mean/running_var -> (out, [0], [0]); input and "
           "output may be channel-blocked (float32) or channels-last (bfloat16) (plan_layouts)",
           infer_bn, make_bn};
  bn.layouts = fwd_layouts;
  bn.bf16 = Bf16::Native;  // BnFwdBf16Kernel, or make_bn_nhwc_bf16's
  bn.fuse_role = FuseRole::BatchNorm;
  bn.relu_fused = opname::batch_norm_relu;
  bn.group_fused = opname::batch_norm_epilogue;
  r.add(std::move(bn));
  OpDef bn_relu{opname::batch_norm_relu,
                "relu(native_batch_norm's out), save_mean and save_invstd in one kernel; inputs, "
                "attrs, dtypes and layouts as aten.native_batch_norm.default; NaN and -0.0 pass "
                "as in aten.relu (made by the fuse_conv_relu pass)",
                infer_bn, make_bn_relu};
  bn_relu.layouts = fwd_layouts;
  bn_relu.bf16 = Bf16::Native;  // as batch norm's
  r.add(std::move(bn_relu));
  OpDef bwd{opname::batch_norm_backward,
            "gradients of native_batch_norm w.r.t. input, weight, bias per output_mask; "
            "train=true reads save_mean/save_invstd, train=false running_mean/running_var; "
            "grad_out, input and grad_input may be channel-blocked (float32) or channels-last "
            "(bfloat16) (plan_layouts)",
            infer_bn_bwd, make_bn_bwd};
  const std::vector<PortRef> acts{in_port(0), in_port(1), out_port(0)};
  bwd.layouts = LayoutCaps{acts, {acts}, nullptr, true};
  bwd.bf16 = Bf16::Native;  // BnBwdBf16Kernel, or make_bn_nhwc_bf16's
  bwd.fuse_role = FuseRole::BatchNormBackward;
  bwd.group_fused = opname::batch_norm_backward_prologue;
  r.add(std::move(bwd));
}

}  // namespace ts

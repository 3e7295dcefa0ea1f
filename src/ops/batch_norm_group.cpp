// Batch norm fused with the pointwise groups that read its output, so that
// output never passes through memory (the fuse_batch_norm_groups pass makes
// these from a float32 batch norm, its activation's group and the backward
// groups that read the same output):
//
// trainstep.batch_norm_epilogue: inputs as aten.native_batch_norm (x,
//   weight?, bias?, running_mean?, running_var?), then the group's inputs
//   1.. ; attrs as batch norm's plus the group (members, outputs:
//   tile_program.h), whose input 0 is batch norm's output y. Outputs:
//   coeffs float32[2, C] (the alpha and beta of y = x * alpha + beta),
//   save_mean, save_invstd, then the group's outputs. Each tile of y is made
//   in cache and handed to the group.
// trainstep.batch_norm_backward_prologue: inputs coeffs, then as
//   aten.native_batch_norm_backward less grad_out (x, weight?, running_mean?,
//   running_var?, save_mean?, save_invstd?), then the group's inputs 1.. ;
//   attrs as batch norm backward's plus a group of one float32 output, the
//   gradient batch norm's backward reads, whose input 0 is y, recomputed
//   from x and coeffs as the forward made it. Outputs as batch norm
//   backward's.
//
// Both run batch norm's own loops (bn_float.h) and sums in the same order,
// so they give the unfused nodes' bits at each layout and ISA level.
// float32 only, plain or channel-blocked; the full-size tensors of the
// group share x's layout.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/block_sums.h"
#include "ops/bn_channel.h"
#include "ops/bn_float.h"
#include "ops/layout.h"
#include "ops/norm.h"
#include "ops/parallel.h"
#include "ops/tile_program.h"

namespace ts {

namespace {

constexpr int kFwdGroupFrom = 5;  // forward: group input k >= 1 is node input 4 + k
constexpr int kFwdOutFrom = 3;    // forward: group output o is node output 3 + o
constexpr int kBwdGroupFrom = 7;  // backward: group input k >= 1 is node input 6 + k

// The layout name on a port ("plain" when none is set).
std::string port_layout_name(const NodeCtx& ctx, bool output, int i) {
  const json& a = ctx.attrs();
  const char* key = output ? "out_layouts" : "in_layouts";
  if (!a.contains(key) || !a[key].is_array() || i >= static_cast<int>(a[key].size())) return "plain";
  return a[key][i].is_string() ? a[key][i].get<std::string>() : "plain";
}

// Batch norm's own attrs (no group, layouts given for its activation
// ports), to check the batch-norm part with its own rules.
json bn_attrs(const NodeCtx& ctx, const std::string& layout, int ins, int outs) {
  json a = ctx.attrs();
  a.erase("members");
  a.erase("outputs");
  a.erase("in_layouts");
  a.erase("out_layouts");
  if (layout != "plain") {
    a["in_layouts"] = json::array();
    for (int i = 0; i < ins; ++i) a["in_layouts"].push_back(layout);
    a["out_layouts"] = json::array();
    for (int i = 0; i < outs; ++i) a["out_layouts"].push_back(i == 0 ? layout : "plain");
  }
  return a;
}

// The group's input types: y (x's type), then node inputs from `from`.
std::vector<TensorType> group_inputs(const NodeCtx& ctx, int x_i, int from) {
  std::vector<TensorType> in = {ctx.input(x_i)};
  for (int i = from; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) ctx.fail("group input " + std::to_string(i - from + 1) + " is None");
    in.push_back(ctx.input(i));
  }
  return in;
}

// Full-size group tensors share x's layout; one-element ones are plain.
void check_group_layouts(const NodeCtx& ctx, const std::string& layout, int in_from,
                         const std::vector<TensorType>& outs, int out_from) {
  auto check = [&](bool output, int i, const TensorType& t) {
    const std::string l = port_layout_name(ctx, output, i);
    const std::string want = t.numel() == 1 ? "plain" : layout;
    if (l != want)
      ctx.fail(std::string(output ? "output " : "input ") + std::to_string(i) + " has layout " + l +
               "; the group's tensors take x's (" + want + ")");
  };
  for (int i = in_from; i < ctx.num_inputs(); ++i) check(false, i, ctx.input(i));
  for (size_t o = 0; o < outs.size(); ++o) check(true, out_from + static_cast<int>(o), outs[o]);
}

// Port `first` (if >= 0) and ports [from, to): those that may be blocked.
std::vector<int> ports_from(int first, int from, int to) {
  std::vector<int> p;
  if (first >= 0) p.push_back(first);
  for (int i = from; i < to; ++i) p.push_back(i);
  return p;
}

const std::string& x_layout_checked(const NodeCtx& ctx, int x_i, std::string& keep) {
  const TensorType& x = ctx.input(x_i);
  if (x.dtype != DType::F32)
    ctx.fail("input " + std::to_string(x_i) + " is " + x.str() + "; these fused forms are float32 only");
  port_layout(ctx, false, x_i, x);  // validates the name against the type
  keep = port_layout_name(ctx, false, x_i);
  if (keep == "nhwc") ctx.fail("channels-last (nhwc) is not taken: float32 only");
  return keep;
}

std::vector<TensorType> infer_epilogue(const NodeCtx& ctx) {
  if (ctx.num_inputs() < kFwdGroupFrom)
    ctx.fail("expected inputs (input, weight?, bias?, running_mean?, running_var?, group inputs...)");
  std::string keep;
  const std::string& layout = x_layout_checked(ctx, 0, keep);
  const json a = bn_attrs(ctx, layout, 1, 3);
  std::vector<TensorType> bn_in;
  std::vector<bool> has;
  for (int i = 0; i < kFwdGroupFrom; ++i) {
    has.push_back(ctx.has_input(i));
    bn_in.push_back(ctx.has_input(i) ? ctx.input(i) : TensorType{});
  }
  const std::vector<TensorType> bn =
      batch_norm_infer(NodeCtx(ctx.node(), opname::batch_norm, a, bn_in, has));
  const TensorType& x = ctx.input(0);
  GroupSignature g = group_signature(ctx, group_inputs(ctx, 0, kFwdGroupFrom));
  if (g.shape != x.shape) ctx.fail("the group's shape " + shape_str(g.shape) + " is not x's " + x.str());
  check_group_layouts(ctx, layout, kFwdGroupFrom, g.outputs, kFwdOutFrom);
  check_layout_ports(ctx, ports_from(0, kFwdGroupFrom, ctx.num_inputs()),
                     ports_from(-1, kFwdOutFrom, kFwdOutFrom + static_cast<int>(g.outputs.size())));
  std::vector<TensorType> out = {{DType::F32, {2, x.shape[1]}}, bn[1], bn[2]};
  out.insert(out.end(), g.outputs.begin(), g.outputs.end());
  return out;
}

std::vector<TensorType> infer_prologue(const NodeCtx& ctx) {
  if (ctx.num_inputs() < kBwdGroupFrom)
    ctx.fail("expected inputs (coeffs, input, weight?, running_mean?, running_var?, save_mean?, "
             "save_invstd?, group inputs...)");
  std::string keep;
  const std::string& layout = x_layout_checked(ctx, 1, keep);
  const TensorType& x = ctx.input(1);
  const TensorType coeffs{DType::F32, {2, x.shape.size() > 1 ? x.shape[1] : 0}};
  if (!ctx.has_input(0) || ctx.input(0) != coeffs)
    ctx.fail("coeffs must be " + coeffs.str() + " (the forward's alpha and beta)");
  const json a = bn_attrs(ctx, layout, 2, 1);
  std::vector<TensorType> bn_in = {x};
  std::vector<bool> has = {true};
  for (int i = 1; i < kBwdGroupFrom; ++i) {
    has.push_back(ctx.has_input(i));
    bn_in.push_back(ctx.has_input(i) ? ctx.input(i) : TensorType{});
  }
  const std::vector<TensorType> bn =
      batch_norm_backward_infer(NodeCtx(ctx.node(), opname::batch_norm_backward, a, bn_in, has));
  GroupSignature g = group_signature(ctx, group_inputs(ctx, 1, kBwdGroupFrom));
  if (g.outputs.size() != 1 || g.outputs[0] != x)
    ctx.fail("the group must have one output of x's type " + x.str() + " (the gradient)");
  check_group_layouts(ctx, layout, kBwdGroupFrom, {}, 0);
  if (port_layout_name(ctx, true, 0) != layout) ctx.fail("grad_input takes x's layout (" + layout + ")");
  check_layout_ports(ctx, ports_from(1, kBwdGroupFrom, ctx.num_inputs()), {0});
  return bn;
}

BnGeom geom_of(const TensorType& x) {
  BnGeom g;
  g.N = x.shape[0];
  g.C = x.shape[1];
  for (size_t d = 2; d < x.shape.size(); ++d) g.S *= x.shape[d];
  return g;
}

// Shared by both directions: layout, threads, program, scratch and the
// walk over tiles. A unit is what one channel's coefficients cover in a
// row: a plane of S values (plain) or a sample's channel block, S rows of B
// lanes (blocked). Tiles run across units, so small planes make no small
// tiles.
struct GroupBnKernel : Kernel {
  BnGeom g;
  int64_t B = 1;  // channel block; 1: plain
  bool train = true;
  double eps = 0;
  int nthr = 1;
  std::unique_ptr<TileProgram> prog;
  Buffer scratch;          // per thread: y's tile, then the gradient's tile or plane
  int64_t per_thread = 0;  // floats of scratch per thread
  std::vector<double> part, m;
  std::vector<float> a, b, k;

  int64_t numel() const { return g.N * g.C * g.S; }
  int64_t unit() const { return g.S * B; }
  float* thread_scratch(int t) const { return static_cast<float*>(scratch.data()) + t * per_thread; }
  bool parallel() const { return g.M() * g.C > (1 << 15); }

  // The lines of x and of the group's inputs from element off on (see
  // TileProgram::prefetch).
  void prefetch(const float* x, const Tensor* in, int64_t off) const {
    if (off >= numel()) return;
    prefetch_lines(x + off, std::min(kTile, numel() - off) * int64_t(sizeof(float)));
    prog->prefetch(off, in);
  }

  // y = x * alpha + beta for elements [off, off + len), each unit's part
  // with its channel's coefficients (ca, cb), into y: batch norm's own loops.
  void make_y(const float* x, const float* ca, const float* cb, int64_t off, int64_t len, float* y) const {
    const int64_t U = unit(), CB = g.C / B;
    for (int64_t i = 0; i < len;) {
      const int64_t u = (off + i) / U, n = std::min(U - (off + i) % U, len - i);
      if (B == 1) {
        const int64_t c = u % g.C;
        bn_apply(x + off + i, ca[c], cb[c], y + i, n);
      } else {
        const int64_t c0 = (u % CB) * B;
        if (B == 16) bn_apply_rows<16>(ca + c0, cb + c0, x + off + i, y + i, n / 16);
        else bn_apply_rows<8>(ca + c0, cb + c0, x + off + i, y + i, n / 8);
      }
      i += n;
    }
  }

  // f(off, len) for the tiles of [begin, end), prefetching ahead.
  template <class F>
  void tiles(const float* x, const Tensor* in, int64_t begin, int64_t end, F&& f) const {
    for (int64_t off = begin; off < end; off += kTile) {
      if (off + kPrefetchTiles * kTile < end) prefetch(x, in, off + kPrefetchTiles * kTile);
      f(off, std::min(kTile, end - off));
    }
  }

  // Each channel's totals of the blocked pass 1 (`part`, samples added in
  // order, as BnBlockedKernel adds them; none when `sums` is false: eval
  // forward) through BnChannelStep into a, b, k.
  void channel_steps(const Tensor* in, Tensor* out, const BnChannelStep& step, bool sums) {
    for (int64_t c = 0; c < g.C; ++c) {
      double t1 = 0, t2 = 0;
      if (sums)
        for (int64_t n = 0; n < g.N; ++n) {
          t1 += part[(n * g.C + c) * 2];
          t2 += part[(n * g.C + c) * 2 + 1];
        }
      step(in, out, c, t1, t2, m[c], a[c], b[c], k[c]);
    }
  }

  void setup(const KernelCtx& kc, const TensorType& x, int x_port, int group_from, int out_base) {
    const NodeCtx& ctx = kc.node;
    g = geom_of(x);
    B = layout_block(port_layout(ctx, false, x_port, x));
    nthr = kc.threads > 0 ? kc.threads : omp_get_max_threads();
    std::vector<int> tensor_of = {-1};
    for (int i = group_from; i < ctx.num_inputs(); ++i) tensor_of.push_back(i);
    prog = std::make_unique<TileProgram>(ctx, group_inputs(ctx, x_port, group_from), tensor_of,
                                         out_base, nthr);
    part.assign(static_cast<size_t>(g.N * g.C * 2), 0.0);
    m.assign(g.C, 0.0);
    a.assign(g.C, 0.f);
    b.assign(g.C, 0.f);
    k.assign(g.C, 0.f);
  }
};

// ---- forward ----------------------------------------------------------------

struct EpilogueKernel : GroupBnKernel {
  void run(const Tensor* in, Tensor* out) override {
    prog->begin(in, out);
    // BnChannelStep reads and writes batch norm's ports: this node's inputs
    // 0-4 and outputs 1-2 are numbered as batch norm's. The coefficients
    // go to a and b: coeffs may have no reader, and then no buffer.
    const BnChannelStep step{false, train, eps, double(g.M())};
    const float* x = in[0].as<float>();
    bool applied = false;
    if (B == 1) applied = plain_coefficients(in, out, step);
    else if (B == 16) blocked_coefficients<16>(in, out, step);
    else blocked_coefficients<8>(in, out, step);
    if (!applied) {
      const int64_t ntiles = (numel() + kTile - 1) / kTile;
      parallel_region(numel() > kTile && parallel(), [&](int t, int nt) {
        int64_t t0, t1;
        split_range(ntiles, t, nt, t0, t1);
        float* y = thread_scratch(t);
        tiles(x, in, t0 * kTile, std::min(t1 * kTile, numel()), [&](int64_t off, int64_t len) {
          make_y(x, a.data(), b.data(), off, len, y);
          prog->run_tile(t, off, len, in, out, y);
        });
      }, nthr);
    }
    if (out[0].data) {
      std::copy(a.begin(), a.end(), out[0].as<float>());
      std::copy(b.begin(), b.end(), out[0].as<float>() + g.C);
    }
  }

  // BnFwdKernel<float>'s statistics (batch_norm.cpp), per channel. Planes of
  // a tile or more are applied right after their channel's statistics,
  // while x is in cache (returns true); smaller ones in one walk after.
  bool plain_coefficients(const Tensor* in, Tensor* out, const BnChannelStep& step) {
    const float* x = in[0].as<float>();
    const bool apply = g.S >= kTile;
    parallel_region(g.C > 1 && parallel(), [&](int t, int nt) {
      int64_t c0, c1;
      split_range(g.C, t, nt, c0, c1);
      float* y = thread_scratch(t);
      for (int64_t c = c0; c < c1; ++c) {
        double s1 = 0, s2 = 0;
        const double shift = train ? double(x[c * g.S]) : 0.0;
        if (train) stat_sums(g, x, c, shift, s1, s2);
        step(in, out, c, s1, s2, shift, a[c], b[c], k[c]);
        if (!apply) continue;
        for (int64_t n = 0; n < g.N; ++n) {
          const int64_t base = (n * g.C + c) * g.S;
          tiles(x, in, base, base + g.S, [&](int64_t off, int64_t len) {
            make_y(x, a.data(), b.data(), off, len, y);
            prog->run_tile(t, off, len, in, out, y);
          });
        }
      }
    }, nthr);
    return apply;
  }

  // BnBlockedKernel's forward statistics (batch_norm.cpp).
  template <int Bk>
  void blocked_coefficients(const Tensor* in, Tensor* out, const BnChannelStep& step) {
    const float* x = in[0].as<float>();
    const int64_t CB = g.C / Bk, S = g.S, pairs = g.N * CB;
    if (train) {
      for (int64_t c = 0; c < g.C; ++c) m[c] = x[(c / Bk) * S * Bk + c % Bk];
      parallel_for(pairs, pairs > 1 && parallel(), [&](int64_t p) {
        const int64_t n = p / CB, cb = p % CB;
        double s1[Bk], s2[Bk];
        block_lane_sums(Bk, x + p * S * Bk, nullptr, m.data() + cb * Bk, S, s1, s2);
        double* q = part.data() + (n * g.C + cb * Bk) * 2;
        for (int l = 0; l < Bk; ++l) q[2 * l] = s1[l], q[2 * l + 1] = s2[l];
      });
    }
    channel_steps(in, out, step, train);
  }
};

std::unique_ptr<Kernel> make_epilogue(const KernelCtx& kc) {
  auto k = std::make_unique<EpilogueKernel>();
  const TensorType& x = kc.node.input(0);
  k->setup(kc, x, 0, kFwdGroupFrom, kFwdOutFrom);
  k->train = kc.node.attr_bool("training");
  k->eps = kc.node.attr_float("eps");
  k->per_thread = kTile;
  k->scratch = Buffer(static_cast<size_t>(k->nthr * k->per_thread) * sizeof(float));
  return k;
}

// ---- backward ---------------------------------------------------------------

struct PrologueKernel : GroupBnKernel {
  // The gradient is made once, into grad_input's buffer where there is one
  // (the apply then reads it there and overwrites it with grad_input,
  // element by element), else into scratch: 6 passes over the activations
  // where the group and batch norm's backward make 8, and the group runs
  // once. Plain planes smaller than a tile are made in one walk into
  // grad_input's buffer, then summed plane by plane (with no grad_input,
  // plane by plane into scratch: small tiles, but a rare case).

  void run(const Tensor* in, Tensor* out) override {
    prog->begin(in, out);
    // BnChannelStep reads and writes batch norm backward's ports: this
    // node's inputs 2-6 and outputs are numbered as its.
    if (B == 1) return run_plain(in, out);
    if (B == 16) return run_blocked<16>(in, out);
    run_blocked<8>(in, out);
  }

  // BnBwdKernel<float> (batch_norm.cpp) with the gradient made per plane.
  void run_plain(const Tensor* in, Tensor* out) {
    const float* x = in[1].as<float>();
    const float* alpha = in[0].as<float>();
    const float* beta = alpha + g.C;
    float* gi = out[0].data ? out[0].as<float>() : nullptr;
    const BnChannelStep step{true, train, eps, double(g.M())};
    const bool small = g.S < kTile && gi;
    if (small) {
      const int64_t ntiles = (numel() + kTile - 1) / kTile;
      parallel_region(parallel(), [&](int t, int nt) {
        int64_t t0, t1;
        split_range(ntiles, t, nt, t0, t1);
        float* y = thread_scratch(t);
        tiles(x, in, t0 * kTile, std::min(t1 * kTile, numel()), [&](int64_t off, int64_t len) {
          make_y(x, alpha, beta, off, len, y);
          prog->run_tile(t, off, len, in, out, y, gi + off);
        });
      }, nthr);
    }
    parallel_region(g.C > 1 && parallel(), [&](int t, int nt) {
      int64_t c0, c1;
      split_range(g.C, t, nt, c0, c1);
      float* y = thread_scratch(t);
      float* plane = y + kTile;  // the gradient's plane when there is no grad_input
      for (int64_t c = c0; c < c1; ++c) {
        const double mean = step.mean(in, c);
        double sum_g = 0, dotp = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const int64_t base = (n * g.C + c) * g.S;
          float* dy = gi ? gi + base : plane;
          if (!small)
            tiles(x, in, base, base + g.S, [&](int64_t off, int64_t len) {
              make_y(x, alpha, beta, off, len, y);
              prog->run_tile(t, off, len, in, out, y, dy + (off - base));
            });
          plane_grad_sums(dy, x + base, g.S, mean, sum_g, dotp);
        }
        // grad_weight, grad_bias and dx's coefficients, as BnBwdKernel<float>.
        float scale, gmean, kk;
        step(in, out, c, sum_g, dotp, mean, scale, gmean, kk);
        if (!gi) continue;
        const float mean_f = float(mean);
        for (int64_t n = 0; n < g.N; ++n) {
          const int64_t base = (n * g.C + c) * g.S;
          bn_grad_apply(gi + base, x + base, gmean, mean_f, kk, scale, gi + base, g.S);
        }
      }
    }, nthr);
  }

  // BnBlockedKernel's backward with the gradient made in tiles across a
  // thread's (sample, block) pairs; each pair's sums go on across its
  // parts in row order, as one call over the pair would add them.
  template <int Bk>
  void run_blocked(const Tensor* in, Tensor* out) {
    const float* x = in[1].as<float>();
    const float* alpha = in[0].as<float>();
    const float* beta = alpha + g.C;
    float* gi = out[0].data ? out[0].as<float>() : nullptr;
    const BnChannelStep step{true, train, eps, double(g.M())};
    const int64_t CB = g.C / Bk, S = g.S, pairs = g.N * CB, U = unit();
    const bool par = pairs > 1 && parallel();
    for (int64_t c = 0; c < g.C; ++c) m[c] = step.mean(in, c);
    parallel_region(par, [&](int t, int nt) {
      int64_t p0, p1;
      split_range(pairs, t, nt, p0, p1);
      float* y = thread_scratch(t);
      double s1[Bk] = {}, s2[Bk] = {};
      tiles(x, in, p0 * U, p1 * U, [&](int64_t off, int64_t len) {
        float* dy = gi ? gi + off : y + kTile;
        make_y(x, alpha, beta, off, len, y);
        prog->run_tile(t, off, len, in, out, y, dy);
        for (int64_t i = 0; i < len;) {
          const int64_t p = (off + i) / U, at = (off + i) % U, n = std::min(U - at, len - i);
          block_lane_sums(Bk, x + off + i, dy + i, m.data() + (p % CB) * Bk, n / Bk, s1, s2, at > 0);
          if (at + n == U) {  // the pair is done
            double* q = part.data() + ((p / CB) * g.C + (p % CB) * Bk) * 2;
            for (int l = 0; l < Bk; ++l) q[2 * l] = s1[l], q[2 * l + 1] = s2[l];
          }
          i += n;
        }
      });
    }, nthr);
    channel_steps(in, out, step, true);
    if (!gi) return;
    parallel_for(pairs, par, [&](int64_t p) {
      const int64_t cb = p % CB;
      float mf[Bk];
      for (int l = 0; l < Bk; ++l) mf[l] = float(m[cb * Bk + l]);
      float* d = gi + p * U;
      bn_grad_apply_rows<Bk>(d, x + p * U, b.data() + cb * Bk, mf, k.data() + cb * Bk,
                             a.data() + cb * Bk, d, S);
    });
  }
};

std::unique_ptr<Kernel> make_prologue(const KernelCtx& kc) {
  auto k = std::make_unique<PrologueKernel>();
  const TensorType& x = kc.node.input(1);
  k->setup(kc, x, 1, kBwdGroupFrom, -1);
  k->train = kc.node.attr_bool("train");
  k->eps = kc.node.attr_float("eps");
  // y's tile, then a tile (blocked) or a plane (plain) of the gradient.
  k->per_thread = kTile + (k->B == 1 ? k->g.S : kTile);
  k->scratch = Buffer(static_cast<size_t>(k->nthr * k->per_thread) * sizeof(float));
  return k;
}

}  // namespace

void register_batch_norm_group_ops(OpRegistry& r) {
  // x and the group's full-size tensors share one layout.
  LayoutCaps fwd{{in_port(0)}, {{in_port(0)}}};
  fwd.blocked_inputs_from = kFwdGroupFrom;
  fwd.blocked_outputs_from = kFwdOutFrom;
  OpDef epi{opname::batch_norm_epilogue,
            "float32 batch norm whose output y goes straight into a pointwise group (attrs as "
            "native_batch_norm's plus members/outputs, group input 0 = y, inputs 1.. after batch "
            "norm's 5) -> (coeffs [2, C]: alpha, beta of y = x * alpha + beta; save_mean; "
            "save_invstd; the group's outputs); x and the group may be channel-blocked (made by "
            "the fuse_batch_norm_groups pass)",
            infer_epilogue, make_epilogue};
  epi.layouts = fwd;
  epi.bf16 = Bf16::No;
  r.add(std::move(epi));
  LayoutCaps bwd{{in_port(1), out_port(0)}, {{in_port(1), out_port(0)}}};
  bwd.blocked_inputs_from = kBwdGroupFrom;
  OpDef pro{opname::batch_norm_backward_prologue,
            "float32 native_batch_norm_backward whose grad_out is a pointwise group's one output, "
            "made tile by tile (inputs coeffs, then batch norm backward's less grad_out, then the "
            "group's inputs 1..; group input 0 = y, recomputed from x and coeffs); outputs as "
            "native_batch_norm_backward's; x, grad_input and the group may be channel-blocked "
            "(made by the fuse_batch_norm_groups pass)",
            infer_prologue, make_prologue};
  pro.layouts = bwd;
  pro.bf16 = Bf16::No;
  r.add(std::move(pro));
}

}  // namespace ts

#include "ops/conv_winograd.h"

#include <algorithm>
#include <cstring>

#include "ops/isa_target.h"
#include "ops/parallel.h"
#include "ops/winograd_f2x3.h"
#include "trainstep/cpu.h"

namespace ts {
namespace {

// What runs after the output transform, per element.
enum class Epilogue { None, Relu, Mask };

// The convolution as run here: x (N, Ci, H, W) -> y (N, Co, OH, OW), 3x3,
// stride 1, padding (ph, pw), both channel-blocked with B lanes. The input
// gradient is such a convolution too (make_winograd_bwd_data).
struct Plan {
  int64_t N, Ci, Co, H, W, OH, OW, ph, pw;
  int64_t B;
  int64_t TH, TW, tiles;  // 2x2 output tiles: per image in h and in w; in all
  int64_t T;              // tiles per block, a multiple of every level's MR
  bool bias;
  Epilogue epi;
};

// One run's tensors. u: the transformed weight, per xi Ci x Co in column
// panels of 2B output channels ([Co / 2B][Ci][2B]), then one of B when Co
// is an odd number of blocks ([Ci][B]).
struct Args {
  const float* x;
  const float* u;
  const float* bias;  // Co floats, or null
  const float* mask;  // Epilogue::Mask: relu's input, y's layout
  float* y;
};

// Tiles per block: a multiple of 24 (every level's MR divides it). The
// transformed inputs and products of a block, 64 * T * (Ci + Co) bytes,
// stay in L2 between the transforms and the products.
constexpr int64_t kTileQuantum = 24;
constexpr int64_t kBlockBytes = 192 << 10;

// Register tiles of the products: MR rows by NV blocks of output
// channels. AVX2 has 16 vector registers (8 lanes: MR = 6 by 2 blocks, or
// 12 by 1: 12 accumulators), AVX-512 32 (8 by 2, 12 by 1). The weight
// gradient's rows are input channels, MR of them dividing a block: 4 at
// AVX2 (8 accumulators), 8 at AVX-512.
template <int B, int NV>
constexpr int mr_base() {
  return 48 / B * (3 - NV);
}
template <int NV>
constexpr int mr_avx512() {
  return NV == 2 ? 8 : 12;
}
template <int B>
constexpr int mr_wgrad_base() {
  return 32 / B;
}
constexpr int kMrWgradAvx512 = 8;

// c[i][0 .. NV*B) (+)= sum over k < K of a[i * ia + k * ka] *
// b[k * ldb .. + NV*B), for i < MR: one register tile of a product.
template <int B, int MR, int NV, bool Acc>
TS_INLINE void product_tile(const float* a, int64_t ia, int64_t ka, const float* b, int64_t ldb,
                            float* c, int64_t ldc, int64_t K) {
  using V = typename VecOf<B>::type;
  V acc[MR][NV];
  // x * ones is a plain broadcast (x * 1.f folds away).
  const V ones = V{} + 1.f;
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t k = 0; k < K; ++k) {
    V bk[NV];
    for (int j = 0; j < NV; ++j) std::memcpy(&bk[j], b + k * ldb + j * B, sizeof(V));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V av = a[i * ia + k * ka] * ones;
      for (int j = 0; j < NV; ++j) acc[i][j] += av * bk[j];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) {
      V out = acc[i][j];
      if (Acc) {
        V old;
        std::memcpy(&old, c + i * ldc + j * B, sizeof(V));
        out += old;
      }
      std::memcpy(c + i * ldc + j * B, &out, sizeof(V));
    }
}

using winograd::TilePos;
// Tile t of the plan: its image and its first output row and column.
TS_INLINE TilePos tile_pos(const Plan& p, int64_t t) { return winograd::tile_pos(p.TH, p.TW, t); }

// The input transform B^T d B of the 4x4 windows of tiles [t0, t0 + nt)
// into v[xi][tile][Ci]. Lanes are channels throughout, so every transform
// is vector arithmetic on whole blocks.
template <int B>
TS_INLINE void input_transform(const Plan& p, const float* x, int64_t t0, int64_t nt, float* v) {
  using V = typename VecOf<B>::type;
  const int64_t CB = p.Ci / B, vs = p.T * p.Ci;
  for (int64_t i = 0; i < nt; ++i) {
    const TilePos tp = tile_pos(p, t0 + i);
    const int64_t ih0 = tp.oh0 - p.ph, iw0 = tp.ow0 - p.pw;
    const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + 4 <= p.H && iw0 + 4 <= p.W;
    for (int64_t cb = 0; cb < CB; ++cb) {
      const float* xs = x + (tp.n * CB + cb) * p.H * p.W * B;
      V d[4][4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const int64_t ih = ih0 + r, iw = iw0 + c;
          if (inside || (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W))
            std::memcpy(&d[r][c], xs + (ih * p.W + iw) * B, sizeof(V));
          else
            d[r][c] = V{};
        }
      V f[16];
      winograd::input_transform(d, f);
      float* out = v + i * p.Ci + cb * B;
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) std::memcpy(out + k * vs, &f[k], sizeof(V));
    }
  }
}

// One block of tiles [t0, t0 + T) of a convolution (forward or input
// gradient): the input transform, the 16 products m[xi] = v[xi] @ u[xi]
// (tiles x Co), and the output transform A^T m A into each tile's 2x2
// outputs, with bias and epilogue.
template <int B, int MR2, int MR1>
TS_INLINE void conv_block(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {
  using V = typename VecOf<B>::type;
  const int64_t nt = std::min(p.T, p.tiles - t0);
  const int64_t OB = p.Co / B, vs = p.T * p.Ci, ms = p.T * p.Co;  // ms, vs: between xi
  input_transform<B>(p, a.x, t0, nt, v);
  // Column panels of 2 blocks, then the odd block. Panels outer: a panel of
  // u (Ci x 2B) stays in L1 while the tiles pass.
  const int64_t full = p.Co / (2 * B);
  for (int xi = 0; xi < 16; ++xi) {
    const float* vx = v + xi * vs;
    const float* ux = a.u + xi * p.Ci * p.Co;
    float* mx = m + xi * ms;
    for (int64_t q = 0; q < full; ++q)
      for (int64_t i = 0; i < nt; i += MR2)
        product_tile<B, MR2, 2, false>(vx + i * p.Ci, p.Ci, 1, ux + q * p.Ci * 2 * B, 2 * B,
                                       mx + i * p.Co + q * 2 * B, p.Co, p.Ci);
    if (p.Co % (2 * B))
      for (int64_t i = 0; i < nt; i += MR1)
        product_tile<B, MR1, 1, false>(vx + i * p.Ci, p.Ci, 1, ux + full * p.Ci * 2 * B, B,
                                       mx + i * p.Co + full * 2 * B, p.Co, p.Ci);
  }
  for (int64_t i = 0; i < nt; ++i) {
    const TilePos tp = tile_pos(p, t0 + i);
    const int rows = tp.oh0 + 1 < p.OH ? 2 : 1, cols = tp.ow0 + 1 < p.OW ? 2 : 1;
    for (int64_t ob = 0; ob < OB; ++ob) {
      V s[16], out[2][2];
      const float* in = m + i * p.Co + ob * B;
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) std::memcpy(&s[k], in + k * ms, sizeof(V));
      winograd::output_transform(s, out);
      V bias = V{};
      if (p.bias) std::memcpy(&bias, a.bias + ob * B, sizeof(V));
      for (int r = 0; r < rows; ++r) {
        const V yv[2] = {out[r][0] + bias, out[r][1] + bias};
        const int64_t row = ((tp.n * OB + ob) * p.OH + tp.oh0 + r) * p.OW + tp.ow0;
        for (int c = 0; c < cols; ++c) {
          V y = yv[c];
          if (p.epi == Epilogue::Relu) {  // as aten.relu: NaN stays
            y = y < V{} ? V{} : y;
          } else if (p.epi == Epilogue::Mask) {  // relu backward: 0 where x <= 0 (NaN passes)
            V x;
            std::memcpy(&x, a.mask + (row + c) * B, sizeof(V));
            y = x <= V{} ? V{} : y;
          }
          std::memcpy(a.y + (row + c) * B, &y, sizeof(V));
        }
      }
    }
  }
}

// One block of tiles of the weight gradient: v from x (input transform),
// dm[xi][tile][Co] = (A dy A^T)[xi] from each tile's 2x2 grad_output (0
// past the edge), then du[xi] (Ci x Co) += v[xi]^T @ dm[xi]. db (Co lanes)
// sums grad_output for the bias gradient.
template <int B, int MRW>
TS_INLINE void wgrad_block(const Plan& p, const float* x, const float* dy, int64_t t0, float* v,
                           float* dm, float* du, float* db) {
  using V = typename VecOf<B>::type;
  const int64_t nt = std::min(p.T, p.tiles - t0);
  const int64_t OB = p.Co / B, vs = p.T * p.Ci, ms = p.T * p.Co;
  input_transform<B>(p, x, t0, nt, v);
  for (int64_t i = 0; i < nt; ++i) {
    const TilePos tp = tile_pos(p, t0 + i);
    const bool r1 = tp.oh0 + 1 < p.OH, c1 = tp.ow0 + 1 < p.OW;
    for (int64_t ob = 0; ob < OB; ++ob) {
      const float* g = dy + ((tp.n * OB + ob) * p.OH + tp.oh0) * p.OW * B + tp.ow0 * B;
      V y[2][2] = {};
      std::memcpy(&y[0][0], g, sizeof(V));
      if (c1) std::memcpy(&y[0][1], g + B, sizeof(V));
      if (r1) std::memcpy(&y[1][0], g + p.OW * B, sizeof(V));
      if (r1 && c1) std::memcpy(&y[1][1], g + p.OW * B + B, sizeof(V));
      V sum;
      std::memcpy(&sum, db + ob * B, sizeof(V));
      sum += (y[0][0] + y[0][1]) + (y[1][0] + y[1][1]);
      std::memcpy(db + ob * B, &sum, sizeof(V));
      V f[16];
      winograd::grad_transform(y, f);
      float* out = dm + i * p.Co + ob * B;
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) std::memcpy(out + k * ms, &f[k], sizeof(V));
    }
  }
  const int64_t full = p.Co / (2 * B);
  for (int xi = 0; xi < 16; ++xi) {
    const float* vx = v + xi * vs;
    const float* mx = dm + xi * ms;
    float* ux = du + xi * p.Ci * p.Co;
    for (int64_t q = 0; q < full; ++q)
      for (int64_t ci = 0; ci < p.Ci; ci += MRW)
        product_tile<B, MRW, 2, true>(vx + ci, 1, p.Ci, mx + q * 2 * B, p.Co,
                                      ux + ci * p.Co + q * 2 * B, p.Co, nt);
    if (p.Co % (2 * B))
      for (int64_t ci = 0; ci < p.Ci; ci += MRW)
        product_tile<B, MRW, 1, true>(vx + ci, 1, p.Ci, mx + full * 2 * B, p.Co,
                                      ux + ci * p.Co + full * 2 * B, p.Co, nt);
  }
}

// The level's copies are functions, not lambdas (isa_target.h says why).
struct BlockFns {
  void (*conv)(const Plan&, const Args&, int64_t, float*, float*);
  void (*wgrad)(const Plan&, const float*, const float*, int64_t, float*, float*, float*, float*);
};

#define TS_WINOGRAD_LEVEL(ATTR, SUFFIX, MR2, MR1, MRW)                                          \
  template <int B>                                                                               \
  ATTR void conv_##SUFFIX(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {        \
    conv_block<B, MR2, MR1>(p, a, t0, v, m);                                                     \
  }                                                                                              \
  template <int B>                                                                               \
  ATTR void wgrad_##SUFFIX(const Plan& p, const float* x, const float* dy, int64_t t0, float* v, \
                           float* dm, float* du, float* db) {                                    \
    wgrad_block<B, MRW>(p, x, dy, t0, v, dm, du, db);                                            \
  }
TS_WINOGRAD_LEVEL(, base, (mr_base<B, 2>()), (mr_base<B, 1>()), mr_wgrad_base<B>())
#if TS_X86
TS_WINOGRAD_LEVEL(TS_AVX512, avx512, mr_avx512<2>(), mr_avx512<1>(), kMrWgradAvx512)
#if !defined(__AVX2__)
TS_WINOGRAD_LEVEL(TS_AVX2, avx2, (mr_base<B, 2>()), (mr_base<B, 1>()), mr_wgrad_base<B>())
#endif
#endif
#undef TS_WINOGRAD_LEVEL

// The build's baseline code, or a wider level's when the CPU has it on.
template <int B>
BlockFns block_fns() {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return {&conv_avx512<B>, &wgrad_avx512<B>};
#if !defined(__AVX2__)
  if (cpu_isa() == CpuIsa::Avx2) return {&conv_avx2<B>, &wgrad_avx2<B>};
#endif
#endif
  return {&conv_base<B>, &wgrad_base<B>};
}

// u[xi] (Args) = (G g G^T)[xi] for each input channel ci and output
// channel co, g the 3x3 kernel from ci to co. `flip`: the input
// gradient's kernel, g[co][ci] = w[ci][co] rotated by 180 degrees.
void transform_weights(const Plan& p, const float* w, bool flip, float* u, bool parallel) {
  const int64_t nr = 2 * p.B, full = p.Co / nr;
  parallel_for(p.Co, parallel, [&](int64_t co) {
    // Its panel of u[xi], that panel's row length and its lane there.
    const int64_t q = co / nr, width = q < full ? nr : p.B, lane = co - q * nr;
    for (int64_t ci = 0; ci < p.Ci; ++ci) {
      float g[3][3];
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw)
          g[kh][kw] = flip ? w[((ci * p.Co + co) * 3 + 2 - kh) * 3 + 2 - kw]
                           : w[((co * p.Ci + ci) * 3 + kh) * 3 + kw];
      float uv[16];
      winograd::weight_transform(g, uv);
      for (int k = 0; k < 16; ++k) u[k * p.Ci * p.Co + q * p.Ci * nr + ci * width + lane] = uv[k];
    }
  });
}

// The weight gradient from du = sum over threads of du_t[xi] (Ci x Co):
// gw[co][ci] = G^T du G.
void weight_grad(const Plan& p, const float* du, int used, int64_t per_thread, float* gw) {
  const int64_t cc = p.Ci * p.Co;
  for (int64_t co = 0; co < p.Co; ++co)
    for (int64_t ci = 0; ci < p.Ci; ++ci) {
      float d[16];
      for (int k = 0; k < 16; ++k) {
        float s = 0.f;
        for (int t = 0; t < used; ++t) s += du[t * per_thread + k * cc + ci * p.Co + co];
        d[k] = s;
      }
      winograd::weight_grad_transform(d, gw + (co * p.Ci + ci) * 9);
    }
}

// What a kernel computes: the forward, the input gradient (the forward of
// grad_output with the flipped weight), or the weight (and bias) gradient.
enum class Mode { Forward, DataGrad, WeightGrad };

class WinogradKernel : public Kernel {
 public:
  WinogradKernel(const Plan& p, Mode mode, int threads)
      : p_(p), mode_(mode), threads_(std::max(threads, 1)) {
    const int64_t blocks = (p.tiles + p.T - 1) / p.T;
    parallel_ = threads_ > 1 && blocks > 1;
    per_thread_ = 16 * p.T * (p.Ci + p.Co);
    if (mode == Mode::WeightGrad)
      per_thread_ += 16 * p.Ci * p.Co + p.Co;  // du and the bias sums
    else
      u_ = Buffer(sizeof(float) * size_t(16 * p.Co * p.Ci));
    // Zeroed (Buffer): the last block's rows past its tiles are read by
    // whole register tiles, and their products are never used.
    scratch_ = Buffer(sizeof(float) * size_t(threads_ * per_thread_));
  }

  void run(const Tensor* in, Tensor* out) override {
    const BlockFns f = p_.B == 16 ? block_fns<16>() : block_fns<8>();
    if (mode_ == Mode::WeightGrad) return run_wgrad(f, in, out);
    if (!out[0].data) return;
    const bool data = mode_ == Mode::DataGrad;
    Args a{};
    a.x = in[0].as<float>();
    a.u = static_cast<const float*>(u_.data());
    if (data && p_.epi == Epilogue::Mask) a.mask = in[1].as<float>();
    if (!data && p_.bias) a.bias = in[2].as<float>();
    a.y = out[0].as<float>();
    transform_weights(p_, in[data ? 2 : 1].as<float>(), data, static_cast<float*>(u_.data()),
                      parallel_ && p_.Co * p_.Ci > 4096);
    for_blocks([&](int64_t t0, float* v) { f.conv(p_, a, t0, v, v + 16 * p_.T * p_.Ci); });
  }

 private:
  // in = (grad_output, x, weight), out = (grad_input, grad_weight, grad_bias).
  void run_wgrad(const BlockFns& f, const Tensor* in, Tensor* out) {
    float* gw = out[1].data ? out[1].as<float>() : nullptr;
    float* gb = p_.bias && out[2].data ? out[2].as<float>() : nullptr;
    if (!gw && !gb) return;
    const float* dy = in[0].as<float>();
    const float* x = in[1].as<float>();
    const int64_t sums = 16 * p_.T * (p_.Ci + p_.Co);  // du's place in a thread's part
    float* scratch = static_cast<float*>(scratch_.data());
    int used = for_blocks([&](int64_t t0, float* v) {
      f.wgrad(p_, x, dy, t0, v, v + 16 * p_.T * p_.Ci, v + sums, v + sums + 16 * p_.Ci * p_.Co);
    }, [&](float* v) { std::fill(v + sums, v + per_thread_, 0.f); });
    if (gw) weight_grad(p_, scratch + sums, used, per_thread_, gw);
    if (gb)  // threads' sums in thread order
      for (int64_t o = 0; o < p_.Co; ++o) {
        float s = 0.f;
        for (int t = 0; t < used; ++t)
          s += scratch[t * per_thread_ + sums + 16 * p_.Ci * p_.Co + o];
        gb[o] = s;
      }
  }

  // winograd::for_tile_blocks over this kernel's tiles and scratch.
  template <class F, class S = void (*)(float*)>
  int for_blocks(F&& block, S&& start = [](float*) {}) {
    return winograd::for_tile_blocks(p_.tiles, p_.T, parallel_, threads_,
                                     static_cast<float*>(scratch_.data()), per_thread_, block, start);
  }

  Plan p_;
  Mode mode_;
  int threads_;
  bool parallel_ = false;
  int64_t per_thread_ = 0;
  // u_: the transformed weight (forward, input gradient). Per thread in
  // scratch_: v (16 x T x Ci), then m (16 x T x Co); for the weight
  // gradient then du (16 x Ci x Co) and the bias sums (Co).
  Buffer u_, scratch_;
};

Plan make_plan(int64_t N, int64_t Ci, int64_t Co, int64_t H, int64_t W, int64_t OH, int64_t OW,
               int64_t ph, int64_t pw, Layout layout) {
  Plan p{};
  p.N = N, p.Ci = Ci, p.Co = Co, p.H = H, p.W = W, p.OH = OH, p.OW = OW, p.ph = ph, p.pw = pw;
  p.B = layout_block(layout);
  p.TH = (OH + 1) / 2, p.TW = (OW + 1) / 2;
  p.tiles = N * p.TH * p.TW;
  const int64_t fit = kBlockBytes / (64 * (Ci + Co)) / kTileQuantum * kTileQuantum;
  p.T = std::max(kTileQuantum, fit);
  return p;
}

}  // namespace

bool winograd_suits(const ConvGeom& g, Layout layout) {
  const int64_t b = layout_block(layout);
  return g.nd == 2 && g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && g.G == 1 && (layout == Layout::Blocked8 || layout == Layout::Blocked16) &&
         g.C % b == 0 && g.O % b == 0 && g.ph <= 2 && g.pw <= 2;
}

bool winograd_worth_timing(const ConvGeom& g) {
  const int64_t tiles = g.N * ((g.OH + 1) / 2) * ((g.OW + 1) / 2);
  return tiles >= std::max(g.C, g.O);
}

std::unique_ptr<Kernel> make_winograd_fwd(const ConvGeom& g, Layout layout, bool bias, bool relu,
                                          int threads) {
  Plan p = make_plan(g.N, g.C, g.O, g.H, g.W, g.OH, g.OW, g.ph, g.pw, layout);
  p.bias = bias;
  p.epi = relu ? Epilogue::Relu : Epilogue::None;
  return std::make_unique<WinogradKernel>(p, Mode::Forward, threads);
}

// grad_input = the stride-1 convolution of grad_output (padding 2 - p) with
// the flipped kernel from output to input channels.
std::unique_ptr<Kernel> make_winograd_bwd_data(const ConvGeom& g, Layout layout, bool relu_mask,
                                               int threads) {
  Plan p = make_plan(g.N, g.O, g.C, g.OH, g.OW, g.H, g.W, 2 - g.ph, 2 - g.pw, layout);
  p.epi = relu_mask ? Epilogue::Mask : Epilogue::None;
  return std::make_unique<WinogradKernel>(p, Mode::DataGrad, threads);
}

std::unique_ptr<Kernel> make_winograd_bwd_weight(const ConvGeom& g, Layout layout, bool want_bias,
                                                 int threads) {
  Plan p = make_plan(g.N, g.C, g.O, g.H, g.W, g.OH, g.OW, g.ph, g.pw, layout);
  p.bias = want_bias;
  return std::make_unique<WinogradKernel>(p, Mode::WeightGrad, threads);
}

}  // namespace ts

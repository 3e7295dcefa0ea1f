#include "ops/conv_winograd.h"

#include <algorithm>
#include <cstring>

#include "ops/isa_target.h"
#include "ops/parallel.h"
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

// Register tiles of the products: MR tiles by NV blocks of output
// channels. AVX2 has 16 vector registers (8 lanes: MR = 6 by 2 blocks, or
// 12 by 1: 12 accumulators), AVX-512 32 (8 by 2, 12 by 1).
template <int B, int NV>
constexpr int mr_base() {
  return 48 / B * (3 - NV);
}
template <int NV>
constexpr int mr_avx512() {
  return NV == 2 ? 8 : 12;
}

// c[i][0 .. NV*B) = sum over k < K of a[i * lda + k] * b[k][0 .. NV*B),
// for i < MR: one register tile of one of the 16 products.
template <int B, int MR, int NV>
TS_INLINE void product_tile(const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                            int64_t K) {
  using V = typename VecOf<B>::type;
  V acc[MR][NV];
  // x * ones is a plain broadcast (x * 1.f folds away).
  const V ones = V{} + 1.f;
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t k = 0; k < K; ++k) {
    V bk[NV];
    for (int j = 0; j < NV; ++j) std::memcpy(&bk[j], b + (k * NV + j) * B, sizeof(V));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V av = a[i * lda + k] * ones;
      for (int j = 0; j < NV; ++j) acc[i][j] += av * bk[j];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) std::memcpy(c + i * ldc + j * B, &acc[i][j], sizeof(V));
}

// The products of one xi for nt tiles: column panels of 2 blocks, then
// the odd block. Panels outer: a panel of u (Ci x 2B) stays in L1 while
// the tiles pass.
template <int B, int MR2, int MR1>
TS_INLINE void products(const Plan& p, const float* v, const float* u, float* m, int64_t nt) {
  const int64_t full = p.Co / (2 * B);
  for (int64_t q = 0; q < full; ++q)
    for (int64_t i = 0; i < nt; i += MR2)
      product_tile<B, MR2, 2>(v + i * p.Ci, p.Ci, u + q * p.Ci * 2 * B, m + i * p.Co + q * 2 * B,
                              p.Co, p.Ci);
  if (p.Co % (2 * B))
    for (int64_t i = 0; i < nt; i += MR1)
      product_tile<B, MR1, 1>(v + i * p.Ci, p.Ci, u + full * p.Ci * 2 * B,
                              m + i * p.Co + full * 2 * B, p.Co, p.Ci);
}

// One block of tiles [t0, t0 + T): the input transform B^T d B of each
// tile's 4x4 window into v[xi][tile][Ci], the 16 products
// m[xi] = v[xi] @ u[xi] (tiles x Co), and the output transform A^T m A
// into each tile's 2x2 outputs, with bias and epilogue. Lanes are channels
// throughout, so every transform is vector arithmetic on whole blocks.
template <int B, int MR2, int MR1>
TS_INLINE void run_block(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {
  using V = typename VecOf<B>::type;
  const int64_t nt = std::min(p.T, p.tiles - t0);
  const int64_t CB = p.Ci / B, OB = p.Co / B, per_image = p.TH * p.TW;
  const int64_t vs = p.T * p.Ci, ms = p.T * p.Co;  // between xi
  for (int64_t i = 0; i < nt; ++i) {
    const int64_t t = t0 + i, n = t / per_image, th = t % per_image / p.TW, tw = t % p.TW;
    const int64_t ih0 = 2 * th - p.ph, iw0 = 2 * tw - p.pw;
    const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + 4 <= p.H && iw0 + 4 <= p.W;
    for (int64_t cb = 0; cb < CB; ++cb) {
      const float* xs = a.x + (n * CB + cb) * p.H * p.W * B;
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
      V e[4][4];  // B^T d: rows
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        e[0][c] = d[0][c] - d[2][c];
        e[1][c] = d[1][c] + d[2][c];
        e[2][c] = d[2][c] - d[1][c];
        e[3][c] = d[1][c] - d[3][c];
      }
      float* out = v + i * p.Ci + cb * B;
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {  // (B^T d) B: columns
        const V f[4] = {e[r][0] - e[r][2], e[r][1] + e[r][2], e[r][2] - e[r][1],
                        e[r][1] - e[r][3]};
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) std::memcpy(out + (4 * r + c) * vs, &f[c], sizeof(V));
      }
    }
  }
  for (int xi = 0; xi < 16; ++xi)
    products<B, MR2, MR1>(p, v + xi * vs, a.u + xi * p.Ci * p.Co, m + xi * ms, nt);
  for (int64_t i = 0; i < nt; ++i) {
    const int64_t t = t0 + i, n = t / per_image, th = t % per_image / p.TW, tw = t % p.TW;
    const int64_t oh0 = 2 * th, ow0 = 2 * tw;
    const int rows = oh0 + 1 < p.OH ? 2 : 1, cols = ow0 + 1 < p.OW ? 2 : 1;
    for (int64_t ob = 0; ob < OB; ++ob) {
      V s[4][4];
      const float* in = m + i * p.Co + ob * B;
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) std::memcpy(&s[k / 4][k % 4], in + k * ms, sizeof(V));
      V r2[2][4];  // A^T s: rows
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        r2[0][c] = s[0][c] + s[1][c] + s[2][c];
        r2[1][c] = s[1][c] - s[2][c] - s[3][c];
      }
      V bias = V{};
      if (p.bias) std::memcpy(&bias, a.bias + ob * B, sizeof(V));
      for (int r = 0; r < rows; ++r) {
        const V yv[2] = {r2[r][0] + r2[r][1] + r2[r][2] + bias,
                         r2[r][1] - r2[r][2] - r2[r][3] + bias};
        const int64_t row = ((n * OB + ob) * p.OH + oh0 + r) * p.OW + ow0;
        for (int c = 0; c < cols; ++c) {
          float* dst = p.epi == Epilogue::None ? a.y + (row + c) * B : nullptr;
          if (dst) {
            std::memcpy(dst, &yv[c], sizeof(V));
            continue;
          }
          V y = yv[c];
          if (p.epi == Epilogue::Relu) {  // as aten.relu: NaN stays
            y = y < V{} ? V{} : y;
          } else {  // relu backward: 0 where relu's input x <= 0 (NaN passes)
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

using BlockFn = void (*)(const Plan&, const Args&, int64_t, float*, float*);

template <int B>
void block_base(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {
  run_block<B, mr_base<B, 2>(), mr_base<B, 1>()>(p, a, t0, v, m);
}
#if TS_X86
template <int B>
TS_AVX512 void block_avx512(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {
  run_block<B, mr_avx512<2>(), mr_avx512<1>()>(p, a, t0, v, m);
}
#if !defined(__AVX2__)
template <int B>
TS_AVX2 void block_avx2(const Plan& p, const Args& a, int64_t t0, float* v, float* m) {
  run_block<B, mr_base<B, 2>(), mr_base<B, 1>()>(p, a, t0, v, m);
}
#endif
#endif

// The build's baseline code, or a wider level's when the CPU has it on.
template <int B>
BlockFn block_for_isa() {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return &block_avx512<B>;
#if !defined(__AVX2__)
  if (cpu_isa() == CpuIsa::Avx2) return &block_avx2<B>;
#endif
#endif
  return &block_base<B>;
}

// u[xi] (Args) = (G g G^T)[xi] for each input channel ci and output
// channel co, g the 3x3 kernel from ci to co. G rows:
// (1, 0, 0), (1/2, 1/2, 1/2), (1/2, -1/2, 1/2), (0, 0, 1). `flip`: the
// input gradient's kernel, g[co][ci] = w[ci][co] rotated by 180 degrees.
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
      float gg[4][3];  // G g
      for (int c = 0; c < 3; ++c) {
        gg[0][c] = g[0][c];
        gg[1][c] = 0.5f * (g[0][c] + g[1][c] + g[2][c]);
        gg[2][c] = 0.5f * (g[0][c] - g[1][c] + g[2][c]);
        gg[3][c] = g[2][c];
      }
      for (int r = 0; r < 4; ++r) {
        const float uv[4] = {gg[r][0], 0.5f * (gg[r][0] + gg[r][1] + gg[r][2]),
                             0.5f * (gg[r][0] - gg[r][1] + gg[r][2]), gg[r][2]};
        for (int c = 0; c < 4; ++c)
          u[(4 * r + c) * p.Ci * p.Co + q * p.Ci * nr + ci * width + lane] = uv[c];
      }
    }
  });
}

class WinogradKernel : public Kernel {
 public:
  WinogradKernel(const Plan& p, bool data_grad, int threads)
      : p_(p), data_grad_(data_grad), threads_(std::max(threads, 1)),
        u_(sizeof(float) * size_t(16 * p.Co * p.Ci)) {
    const int64_t blocks = (p.tiles + p.T - 1) / p.T;
    parallel_ = threads_ > 1 && blocks > 1;
    per_thread_ = 16 * p.T * (p.Ci + p.Co);
    // Zeroed (Buffer): the last block's rows past its tiles are read by
    // whole register tiles, and their products are never used.
    scratch_ = Buffer(sizeof(float) * size_t(threads_ * per_thread_));
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    Args a{};
    a.x = in[0].as<float>();
    a.u = static_cast<const float*>(u_.data());
    if (data_grad_) {
      if (p_.epi == Epilogue::Mask) a.mask = in[1].as<float>();
    } else if (p_.bias) {
      a.bias = in[2].as<float>();
    }
    a.y = out[0].as<float>();
    transform_weights(p_, in[data_grad_ ? 2 : 1].as<float>(), data_grad_,
                      static_cast<float*>(u_.data()), parallel_ && p_.Co * p_.Ci > 4096);
    const BlockFn f = p_.B == 16 ? block_for_isa<16>() : block_for_isa<8>();
    const int64_t blocks = (p_.tiles + p_.T - 1) / p_.T;
    float* scratch = static_cast<float*>(scratch_.data());
    parallel_region(parallel_, [&](int t, int nt) {
      int64_t b, e;
      split_range(blocks, t, nt, b, e);
      float* v = scratch + t * per_thread_;
      float* m = v + 16 * p_.T * p_.Ci;
      for (int64_t k = b; k < e; ++k) f(p_, a, k * p_.T, v, m);
    }, threads_);
  }

 private:
  Plan p_;
  bool data_grad_;
  int threads_;
  bool parallel_ = false;
  int64_t per_thread_ = 0;
  Buffer u_, scratch_;  // per thread: v (16 x T x Ci), then m (16 x T x Co)
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

std::unique_ptr<Kernel> make_winograd_fwd(const ConvGeom& g, Layout layout, bool bias, bool relu,
                                          int threads) {
  Plan p = make_plan(g.N, g.C, g.O, g.H, g.W, g.OH, g.OW, g.ph, g.pw, layout);
  p.bias = bias;
  p.epi = relu ? Epilogue::Relu : Epilogue::None;
  return std::make_unique<WinogradKernel>(p, false, threads);
}

// grad_input = the stride-1 convolution of grad_output (padding 2 - p) with
// the flipped kernel from output to input channels.
std::unique_ptr<Kernel> make_winograd_bwd_data(const ConvGeom& g, Layout layout, bool relu_mask,
                                               int threads) {
  Plan p = make_plan(g.N, g.O, g.C, g.OH, g.OW, g.H, g.W, 2 - g.ph, 2 - g.pw, layout);
  p.epi = relu_mask ? Epilogue::Mask : Epilogue::None;
  return std::make_unique<WinogradKernel>(p, true, threads);
}

}  // namespace ts

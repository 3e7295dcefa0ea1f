#include "ops/conv_winograd_bf16.h"

#include <algorithm>
#include <cstring>

#include "ops/bf16_lanes.h"
#include "ops/isa_target.h"
#include "ops/parallel.h"
#include "ops/winograd_f2x3.h"
#include "trainstep/bfloat16.h"
#include "trainstep/cpu.h"

namespace ts {

#if TS_X86
namespace {

// Every helper that touches a bf16 intrinsic carries the target attribute
// (isa_target.h), so it inlines into the marked block functions.
#define TS_BF16_INLINE TS_AVX512_BF16 inline __attribute__((always_inline))

using V = VecOf<16>::type;  // 16 channels in float32
constexpr int64_t kL = 16;  // channels per vector

enum class Epilogue { None, Mask };

// x (N, H, W, Ci) -> y (N, OH, OW, Co), channels-last, 3x3, stride 1,
// padding (ph, pw): the input gradient is such a convolution, of
// grad_output; the weight gradient is its backward.
struct Plan {
  int64_t N, Ci, Co, H, W, OH, OW, ph, pw;
  int64_t TH, TW, tiles;  // 2x2 output tiles: per image in h and in w; in all
  int64_t T;              // tiles per block: a multiple of kMr and even
  bool bias = false;      // the weight gradient also sums the bias gradient
  Epilogue epi = Epilogue::None;
};

// One run's tensors. u: the transformed weight, per xi in column panels
// of 32 output channels, then one of 16 when Co is an odd number of
// vectors; a panel of width w is [Ci / 2][w][2]: the pairs of input
// channels vdpbf16ps multiplies, for each output channel.
struct Args {
  const uint16_t* x;
  const uint16_t* u;
  const uint16_t* mask;  // Epilogue::Mask: relu's input, y's layout
  uint16_t* y;
};

// Register tiles: 12 tiles by 2 vectors of output channels (24 of the 32
// registers accumulate); the weight gradient's rows are input channels, 8
// by 2. Tiles per block: a multiple of 24 (kMr, and pairs of tiles for the
// weight gradient); a block's transformed inputs and products stay in L2
// (MNIST's layer: 96-768 KiB blocks all within 10 % of each other).
constexpr int kMr = 12;
constexpr int kMrW = 8;
constexpr int64_t kTileQuantum = 24;
constexpr int64_t kBlockBytes = 192 << 10;

using winograd::TilePos;
inline TilePos tile_pos(const Plan& p, int64_t t) { return winograd::tile_pos(p.TH, p.TW, t); }

// 16 bf16 at p as float32 lanes: one widening load and a shift (GCC
// makes two 256-bit halves of load_bf16<16>'s convert). The masked forms
// only keep GCC 12 from warning about the plain ones' undefined operand.
TS_BF16_INLINE void load16(const uint16_t* p, V& v) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m512i w = _mm512_maskz_cvtepu16_epi32(0xFFFF, h);
  v = (V)_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, w, 16));
}

// 16 float32 lanes to 16 bf16 at p.
TS_BF16_INLINE void store16(uint16_t* p, const V& v) {
  const __m256bh h = _mm512_cvtneps_pbh((__m512)v);
  std::memcpy(p, &h, sizeof h);
}

// Two tiles' 16 lanes as 16 bf16 pairs (tile a, tile b) at p: the weight
// gradient sums over tiles, so its products take tiles in pairs.
TS_BF16_INLINE void store16_pairs(uint16_t* p, const V& a, const V& b) {
  const __m512i lo_hi = (__m512i)_mm512_cvtne2ps_pbh((__m512)b, (__m512)a);  // a's 16, then b's
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                       8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  _mm512_storeu_si512(p, _mm512_permutexvar_epi16(idx, lo_hi));
}

// B^T d B of tile t's 4x4 window, input channels [16 cb, 16 cb + 16).
TS_BF16_INLINE void input_transform(const Plan& p, const uint16_t* x, int64_t t, int64_t cb,
                                    V f[16]) {
  const TilePos tp = tile_pos(p, t);
  const int64_t ih0 = tp.oh0 - p.ph, iw0 = tp.ow0 - p.pw;
  const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + 4 <= p.H && iw0 + 4 <= p.W;
  const uint16_t* xs = x + tp.n * p.H * p.W * p.Ci + cb * kL;
  V d[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int64_t ih = ih0 + r, iw = iw0 + c;
      if (inside || (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W))
        load16(xs + (ih * p.W + iw) * p.Ci, d[r][c]);
      else
        d[r][c] = V{};
    }
  winograd::input_transform(d, f);
}

// A dy A^T of tile t's 2x2 grad_output (0 past the edge), output channels
// [16 ob, 16 ob + 16); adds the four values to *db.
TS_BF16_INLINE void grad_transform(const Plan& p, const uint16_t* dy, int64_t t, int64_t ob, V f[16],
                                   V* db) {
  const TilePos tp = tile_pos(p, t);
  const bool r1 = tp.oh0 + 1 < p.OH, c1 = tp.ow0 + 1 < p.OW;
  const uint16_t* g = dy + ((tp.n * p.OH + tp.oh0) * p.OW + tp.ow0) * p.Co + ob * kL;
  V y[2][2] = {};
  load16(g, y[0][0]);
  if (c1) load16(g + p.Co, y[0][1]);
  if (r1) load16(g + p.OW * p.Co, y[1][0]);
  if (r1 && c1) load16(g + p.OW * p.Co + p.Co, y[1][1]);
  *db += (y[0][0] + y[0][1]) + (y[1][0] + y[1][1]);
  winograd::grad_transform(y, f);
}

// c[i][0 .. 16 NV) (+)= sum over k < K of pair a[i * ia + k * ka] (two
// bf16) dot the 16 NV pairs at b + k * ldb, for i < MR.
template <int MR, int NV, bool Acc>
TS_BF16_INLINE void dot_tile(const uint16_t* a, int64_t ia, int64_t ka, const uint16_t* b,
                             int64_t ldb, float* c, int64_t ldc, int64_t K) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512bh bk[NV];
    for (int j = 0; j < NV; ++j) bk[j] = (__m512bh)_mm512_loadu_si512(b + k * ldb + j * 32);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + i * ia + k * ka, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bk[j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) {
      __m512 out = acc[i][j];
      if (Acc) out = _mm512_add_ps(out, _mm512_loadu_ps(c + i * ldc + j * 16));
      _mm512_storeu_ps(c + i * ldc + j * 16, out);
    }
}

// One block of tiles [t0, t0 + T) of the input gradient: the input
// transform into v[xi][tile][Ci] (bf16), the 16 products m[xi] = v[xi] @
// u[xi] (tiles x Co, float32), and the output transform into each tile's
// 2x2 outputs, masked, rounded to bf16.
TS_AVX512_BF16 void conv_block(const Plan& p, const Args& a, int64_t t0, uint16_t* v, float* m) {
  const int64_t nt = std::min(p.T, p.tiles - t0);
  const int64_t CB = p.Ci / kL, OB = p.Co / kL, vs = p.T * p.Ci, ms = p.T * p.Co;
  for (int64_t i = 0; i < nt; ++i)
    for (int64_t cb = 0; cb < CB; ++cb) {
      V f[16];
      input_transform(p, a.x, t0 + i, cb, f);
#pragma GCC unroll 16
      for (int xi = 0; xi < 16; ++xi) store16(v + xi * vs + i * p.Ci + cb * kL, f[xi]);
    }
  // Panels outer: a panel of u (Ci x 32 bf16) stays in L1 while the tiles pass.
  const int64_t full = p.Co / 32, K = p.Ci / 2;
  for (int xi = 0; xi < 16; ++xi) {
    const uint16_t* vx = v + xi * vs;
    const uint16_t* ux = a.u + xi * p.Ci * p.Co;
    float* mx = m + xi * ms;
    for (int64_t q = 0; q < full; ++q)
      for (int64_t i = 0; i < nt; i += kMr)
        dot_tile<kMr, 2, false>(vx + i * p.Ci, p.Ci, 2, ux + q * p.Ci * 32, 64, mx + i * p.Co + q * 32,
                                p.Co, K);
    if (p.Co % 32)
      for (int64_t i = 0; i < nt; i += kMr)
        dot_tile<kMr, 1, false>(vx + i * p.Ci, p.Ci, 2, ux + full * p.Ci * 32, 32,
                                mx + i * p.Co + full * 32, p.Co, K);
  }
  for (int64_t i = 0; i < nt; ++i) {
    const TilePos tp = tile_pos(p, t0 + i);
    const int rows = tp.oh0 + 1 < p.OH ? 2 : 1, cols = tp.ow0 + 1 < p.OW ? 2 : 1;
    for (int64_t ob = 0; ob < OB; ++ob) {
      V s[16], yv[2][2];
      const float* in = m + i * p.Co + ob * kL;
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) std::memcpy(&s[k], in + k * ms, sizeof(V));
      winograd::output_transform(s, yv);
      for (int r = 0; r < rows; ++r) {
        const int64_t at = ((tp.n * p.OH + tp.oh0 + r) * p.OW + tp.ow0) * p.Co + ob * kL;
        for (int c = 0; c < cols; ++c) {
          V y = yv[r][c];
          if (p.epi == Epilogue::Mask) {  // relu backward: 0 where x <= 0 (NaN passes)
            V x;
            load16(a.mask + at + c * p.Co, x);
            y = x <= V{} ? V{} : y;
          }
          store_bf16<16>(a.y + at + c * p.Co, y);
        }
      }
    }
  }
}

// One block of tiles of the weight gradient: v[xi][tile pair][Ci][2] from
// x, dm[xi][tile pair][Co][2] from grad_output (an odd block's last pair
// padded with a zero tile), then du[xi] (Ci x Co, float32) += v[xi]^T @
// dm[xi]; db (Co lanes) sums grad_output for the bias gradient.
TS_AVX512_BF16 void wgrad_block(const Plan& p, const uint16_t* x, const uint16_t* dy, int64_t t0,
                                uint16_t* v, uint16_t* dm, float* du, float* db) {
  const int64_t nt = std::min(p.T, p.tiles - t0);
  const int64_t CB = p.Ci / kL, OB = p.Co / kL, vs = p.T * p.Ci, ms = p.T * p.Co;
  for (int64_t i = 0; i < nt; i += 2) {
    const bool two = i + 1 < nt;
    for (int64_t cb = 0; cb < CB; ++cb) {
      V f0[16], f1[16] = {};
      input_transform(p, x, t0 + i, cb, f0);
      if (two) input_transform(p, x, t0 + i + 1, cb, f1);
#pragma GCC unroll 16
      for (int xi = 0; xi < 16; ++xi)
        store16_pairs(v + xi * vs + i * p.Ci + cb * 2 * kL, f0[xi], f1[xi]);
    }
    for (int64_t ob = 0; ob < OB; ++ob) {
      V sum;
      std::memcpy(&sum, db + ob * kL, sizeof sum);
      V g0[16], g1[16] = {};
      grad_transform(p, dy, t0 + i, ob, g0, &sum);
      if (two) grad_transform(p, dy, t0 + i + 1, ob, g1, &sum);
      std::memcpy(db + ob * kL, &sum, sizeof sum);
#pragma GCC unroll 16
      for (int xi = 0; xi < 16; ++xi)
        store16_pairs(dm + xi * ms + i * p.Co + ob * 2 * kL, g0[xi], g1[xi]);
    }
  }
  const int64_t full = p.Co / 32, K = (nt + 1) / 2;
  for (int xi = 0; xi < 16; ++xi) {
    const uint16_t* vx = v + xi * vs;
    const uint16_t* mx = dm + xi * ms;
    float* ux = du + xi * p.Ci * p.Co;
    for (int64_t q = 0; q < full; ++q)
      for (int64_t ci = 0; ci < p.Ci; ci += kMrW)
        dot_tile<kMrW, 2, true>(vx + 2 * ci, 2, 2 * p.Ci, mx + q * 64, 2 * p.Co,
                                ux + ci * p.Co + q * 32, p.Co, K);
    if (p.Co % 32)
      for (int64_t ci = 0; ci < p.Ci; ci += kMrW)
        dot_tile<kMrW, 1, true>(vx + 2 * ci, 2, 2 * p.Ci, mx + full * 64, 2 * p.Co,
                                ux + ci * p.Co + full * 32, p.Co, K);
  }
}

#undef TS_BF16_INLINE

// u[xi] (Args) = (G g G^T)[xi] rounded to bf16, g the input gradient's
// 3x3 kernel from ci to co: g[co][ci] = w[ci][co] rotated by 180 degrees.
void transform_weights(const Plan& p, const uint16_t* w, uint16_t* u, bool parallel) {
  const int64_t full = p.Co / 32;
  parallel_for(p.Co, parallel, [&](int64_t co) {
    const int64_t q = co / 32, width = q < full ? 32 : 16, lane = co - q * 32;
    for (int64_t ci = 0; ci < p.Ci; ++ci) {
      float g[3][3];
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw)
          g[kh][kw] = bf16_to_float(w[((ci * p.Co + co) * 3 + 2 - kh) * 3 + 2 - kw]);
      float uv[16];
      winograd::weight_transform(g, uv);
      uint16_t* at = u + q * p.Ci * 32 + (ci / 2) * width * 2 + lane * 2 + (ci & 1);
      for (int k = 0; k < 16; ++k) at[k * p.Ci * p.Co] = float_to_bf16(uv[k]);
    }
  });
}

// gw[co][ci] = G^T du G, du the threads' sums in thread order, rounded once.
void weight_grad(const Plan& p, const float* du, int used, int64_t stride, uint16_t* gw,
                 bool parallel) {
  const int64_t cc = p.Ci * p.Co;
  parallel_for(p.Co, parallel, [&](int64_t co) {
    for (int64_t ci = 0; ci < p.Ci; ++ci) {
      float d[16], g[9];
      for (int k = 0; k < 16; ++k) {
        float s = 0.f;
        for (int t = 0; t < used; ++t) s += du[t * stride + k * cc + ci * p.Co + co];
        d[k] = s;
      }
      winograd::weight_grad_transform(d, g);
      for (int k = 0; k < 9; ++k) gw[(co * p.Ci + ci) * 9 + k] = float_to_bf16(g[k]);
    }
  });
}

enum class Mode { DataGrad, WeightGrad };

// Per thread, in bytes: v (16 x T x Ci bf16), then m (16 x T x Co
// float32); or for the weight gradient dm (16 x T x Co bf16), du
// (16 x Ci x Co float32) and the bias sums (Co float32). Every part is a
// multiple of 64 bytes (channels are multiples of 16, T of 24).
class WinogradBf16Kernel : public Kernel {
 public:
  WinogradBf16Kernel(const Plan& p, Mode mode, int threads)
      : p_(p), mode_(mode), threads_(std::max(threads, 1)) {
    const int64_t blocks = (p.tiles + p.T - 1) / p.T;
    parallel_ = threads_ > 1 && blocks > 1;
    v_bytes_ = 32 * p.T * p.Ci;
    if (mode == Mode::WeightGrad) {
      m_bytes_ = 32 * p.T * p.Co;
      per_thread_ = v_bytes_ + m_bytes_ + 64 * p.Ci * p.Co + 4 * p.Co;
    } else {
      m_bytes_ = 64 * p.T * p.Co;
      per_thread_ = v_bytes_ + m_bytes_;
      u_ = Buffer(size_t(32 * p.Co * p.Ci));
    }
    // Zeroed (Buffer): a block's rows past its tiles are read by whole
    // register tiles, and their products are never used.
    scratch_ = Buffer(size_t(threads_ * per_thread_));
  }

  void run(const Tensor* in, Tensor* out) override {
    if (mode_ == Mode::WeightGrad) return run_wgrad(in, out);
    if (!out[0].data) return;
    Args a{};
    a.x = in[0].as<uint16_t>();
    a.u = static_cast<const uint16_t*>(u_.data());
    if (p_.epi == Epilogue::Mask) a.mask = in[1].as<uint16_t>();
    a.y = out[0].as<uint16_t>();
    transform_weights(p_, in[2].as<uint16_t>(), static_cast<uint16_t*>(u_.data()),
                      parallel_ && p_.Co * p_.Ci > 4096);
    for_blocks([&](int64_t t0, char* s) {
      conv_block(p_, a, t0, reinterpret_cast<uint16_t*>(s), reinterpret_cast<float*>(s + v_bytes_));
    });
  }

 private:
  // in = (grad_output, x, weight), out = (grad_input, grad_weight, grad_bias).
  void run_wgrad(const Tensor* in, Tensor* out) {
    uint16_t* gw = out[1].data ? out[1].as<uint16_t>() : nullptr;
    uint16_t* gb = p_.bias && out[2].data ? out[2].as<uint16_t>() : nullptr;
    if (!gw && !gb) return;
    const uint16_t* dy = in[0].as<uint16_t>();
    const uint16_t* x = in[1].as<uint16_t>();
    const int64_t sums = v_bytes_ + m_bytes_;  // du's place in a thread's part
    const int64_t bias_at = sums + 64 * p_.Ci * p_.Co;
    const int used = for_blocks(
        [&](int64_t t0, char* s) {
          wgrad_block(p_, x, dy, t0, reinterpret_cast<uint16_t*>(s),
                      reinterpret_cast<uint16_t*>(s + v_bytes_), reinterpret_cast<float*>(s + sums),
                      reinterpret_cast<float*>(s + bias_at));
        },
        [&](char* s) { std::memset(s + sums, 0, size_t(per_thread_ - sums)); });
    char* scratch = static_cast<char*>(scratch_.data());
    const int64_t stride = per_thread_ / 4;  // floats between threads' parts
    if (gw)
      weight_grad(p_, reinterpret_cast<const float*>(scratch + sums), used, stride, gw,
                  parallel_ && p_.Co * p_.Ci > 4096);
    if (gb)  // threads' sums in thread order
      for (int64_t o = 0; o < p_.Co; ++o) {
        float s = 0.f;
        for (int t = 0; t < used; ++t)
          s += reinterpret_cast<const float*>(scratch + t * per_thread_ + bias_at)[o];
        gb[o] = float_to_bf16(s);
      }
  }

  // winograd::for_tile_blocks over this kernel's tiles and scratch.
  template <class F, class S = void (*)(char*)>
  int for_blocks(F&& block, S&& start = [](char*) {}) {
    return winograd::for_tile_blocks(p_.tiles, p_.T, parallel_, threads_,
                                     static_cast<char*>(scratch_.data()), per_thread_, block, start);
  }

  Plan p_;
  Mode mode_;
  int threads_;
  bool parallel_ = false;
  int64_t v_bytes_ = 0, m_bytes_ = 0, per_thread_ = 0;
  Buffer u_, scratch_;  // u_: the transformed weight (input gradient)
};

Plan make_plan(int64_t N, int64_t Ci, int64_t Co, int64_t H, int64_t W, int64_t OH, int64_t OW,
               int64_t ph, int64_t pw, Mode mode) {
  Plan p{};
  p.N = N, p.Ci = Ci, p.Co = Co, p.H = H, p.W = W, p.OH = OH, p.OW = OW, p.ph = ph, p.pw = pw;
  p.TH = (OH + 1) / 2, p.TW = (OW + 1) / 2;
  p.tiles = N * p.TH * p.TW;
  const int64_t per_tile = mode == Mode::WeightGrad ? 32 * (Ci + Co) : 32 * Ci + 64 * Co;
  const int64_t fit = kBlockBytes / per_tile / kTileQuantum * kTileQuantum;
  p.T = std::max(kTileQuantum, fit);
  return p;
}

}  // namespace

bool winograd_bf16_available() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has && cpu_isa() == CpuIsa::Avx512;
}

bool winograd_bf16_suits(const ConvGeom& g) {
  return g.nd == 2 && g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && g.G == 1 && g.C % kL == 0 && g.O % kL == 0 && g.ph <= 2 && g.pw <= 2;
}

// grad_input = the stride-1 convolution of grad_output (padding 2 - p) with
// the flipped kernel from output to input channels.
std::unique_ptr<Kernel> make_winograd_bf16_bwd_data(const ConvGeom& g, bool relu_mask,
                                                    int threads) {
  Plan p = make_plan(g.N, g.O, g.C, g.OH, g.OW, g.H, g.W, 2 - g.ph, 2 - g.pw, Mode::DataGrad);
  p.epi = relu_mask ? Epilogue::Mask : Epilogue::None;
  return std::make_unique<WinogradBf16Kernel>(p, Mode::DataGrad, threads);
}

std::unique_ptr<Kernel> make_winograd_bf16_bwd_weight(const ConvGeom& g, bool want_bias,
                                                      int threads) {
  Plan p = make_plan(g.N, g.C, g.O, g.H, g.W, g.OH, g.OW, g.ph, g.pw, Mode::WeightGrad);
  p.bias = want_bias;
  return std::make_unique<WinogradBf16Kernel>(p, Mode::WeightGrad, threads);
}

#else  // not x86: no AVX512_BF16

bool winograd_bf16_available() { return false; }
bool winograd_bf16_suits(const ConvGeom&) { return false; }
std::unique_ptr<Kernel> make_winograd_bf16_bwd_data(const ConvGeom&, bool, int) { return nullptr; }
std::unique_ptr<Kernel> make_winograd_bf16_bwd_weight(const ConvGeom&, bool, int) {
  return nullptr;
}

#endif

}  // namespace ts

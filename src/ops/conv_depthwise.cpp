#include "ops/conv_depthwise.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/isa_target.h"
#include "ops/parallel.h"

namespace ts {
namespace {

// Kernel taps per pass over grad_output: their accumulators, grad_output's
// vector and the input's fit in the vector registers (16 ymm for B = 8,
// 32 zmm for B = 16).
template <int B>
constexpr int kTaps = B == 16 ? 14 : 7;

struct Plan {
  int64_t OH, OW, Wp;  // output size; the padded input tile's row length
  int64_t sh, sw;
  std::vector<int64_t> off;  // per tap (kh, kw): its offset in the padded tile, in floats
};

// out[t][l] += sum over (oh, ow) of dy[oh, ow, l] * xs[(oh*sh, ow*sw) + off[t]][l]
// for T taps, and with Bias out[T][l] += the sum of dy[oh, ow, l]: one
// (sample, channel block), float sums over its pixels.
template <int B, int T, bool Bias>
TS_INLINE void taps_pass(const float* dy, const float* xs, const int64_t* off, const Plan& p,
                         float* out) {
  using V = typename VecOf<B>::type;
  V acc[T + 1];
#pragma GCC unroll 16
  for (int t = 0; t <= T; ++t) acc[t] = V{};
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    const float* xr = xs + oh * p.sh * p.Wp * B;
    const float* d = dy + oh * p.OW * B;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      V g;
      std::memcpy(&g, d + ow * B, sizeof g);
      const float* x0 = xr + ow * p.sw * B;
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        V x;
        std::memcpy(&x, x0 + off[t], sizeof x);
        acc[t] += g * x;
      }
      if (Bias) acc[T] += g;
    }
  }
  for (int t = 0; t < (Bias ? T + 1 : T); ++t)
    for (int l = 0; l < B; ++l) out[t * B + l] += acc[t][l];
}

// taps_pass for a tap count n known only at run time (1..kTaps<B>).
template <int B, bool Bias, int T = kTaps<B>>
TS_INLINE void taps_any(int n, const float* dy, const float* xs, const int64_t* off, const Plan& p,
                        float* out) {
  if constexpr (T > 0) {
    if (n == T) return taps_pass<B, T, Bias>(dy, xs, off, p, out);
    taps_any<B, Bias, T - 1>(n, dy, xs, off, p, out);
  }
}

// Every tap (and the bias sum, after the last) of one (sample, channel
// block) into out: KK + 1 rows of B floats.
template <int B>
TS_INLINE void all_taps(const Plan& p, const float* dy, const float* xs, bool bias, float* out) {
  const int64_t KK = static_cast<int64_t>(p.off.size());
  for (int64_t t0 = 0; t0 < KK; t0 += kTaps<B>) {
    const int taps = static_cast<int>(std::min<int64_t>(kTaps<B>, KK - t0));
    if (bias && t0 + taps == KK)
      taps_any<B, true>(taps, dy, xs, p.off.data() + t0, p, out + t0 * B);
    else
      taps_any<B, false>(taps, dy, xs, p.off.data() + t0, p, out + t0 * B);
  }
}

using TapsFn = void (*)(const Plan&, const float*, const float*, bool, float*);

template <int B>
void all_taps_base(const Plan& p, const float* dy, const float* xs, bool bias, float* out) {
  all_taps<B>(p, dy, xs, bias, out);
}
#if TS_X86
template <int B>
TS_AVX512 void all_taps_avx512(const Plan& p, const float* dy, const float* xs, bool bias, float* out) {
  all_taps<B>(p, dy, xs, bias, out);
}
#if !defined(__AVX2__)
template <int B>
TS_AVX2 void all_taps_avx2(const Plan& p, const float* dy, const float* xs, bool bias, float* out) {
  all_taps<B>(p, dy, xs, bias, out);
}
#endif
#endif

// The build's baseline code, or a wider level's when the CPU has it on.
template <int B>
TapsFn taps_for_isa() {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return &all_taps_avx512<B>;
#if !defined(__AVX2__)
  if (cpu_isa() == CpuIsa::Avx2) return &all_taps_avx2<B>;
#endif
#endif
  return &all_taps_base<B>;
}

// The forward of one (sample, channel block): out[oh, ow] = bias + the sum
// over taps t of w[t] * xs[(oh*sh, ow*sw) + off[t]], B lanes each.
template <int B>
TS_INLINE void fwd_tile(const Plan& p, const float* xs, const float* w, const float* bias, float* out) {
  using V = typename VecOf<B>::type;
  const int64_t KK = static_cast<int64_t>(p.off.size());
  V b;
  std::memcpy(&b, bias, sizeof b);
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    const float* xr = xs + oh * p.sh * p.Wp * B;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      const float* x0 = xr + ow * p.sw * B;
      V acc = b;
      for (int64_t t = 0; t < KK; ++t) {
        V x, wt;
        std::memcpy(&x, x0 + p.off[t], sizeof x);
        std::memcpy(&wt, w + t * B, sizeof wt);
        acc += wt * x;
      }
      std::memcpy(out + (oh * p.OW + ow) * B, &acc, sizeof acc);
    }
  }
}

using FwdFn = void (*)(const Plan&, const float*, const float*, const float*, float*);

template <int B>
void fwd_tile_base(const Plan& p, const float* xs, const float* w, const float* bias, float* out) {
  fwd_tile<B>(p, xs, w, bias, out);
}
#if TS_X86
template <int B>
TS_AVX512 void fwd_tile_avx512(const Plan& p, const float* xs, const float* w, const float* bias,
                               float* out) {
  fwd_tile<B>(p, xs, w, bias, out);
}
#if !defined(__AVX2__)
template <int B>
TS_AVX2 void fwd_tile_avx2(const Plan& p, const float* xs, const float* w, const float* bias,
                           float* out) {
  fwd_tile<B>(p, xs, w, bias, out);
}
#endif
#endif

template <int B>
FwdFn fwd_for_isa() {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return &fwd_tile_avx512<B>;
#if !defined(__AVX2__)
  if (cpu_isa() == CpuIsa::Avx2) return &fwd_tile_avx2<B>;
#endif
#endif
  return &fwd_tile_base<B>;
}

// Where element (n, c, h, w) of an (N, C, H, W) tensor sits in a layout
// with block lb (1: plain).
struct Addr {
  int64_t C, H, W, lb;
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    if (lb == 1) return ((n * C + c) * H + h) * W + w;
    return ((n * (C / lb) + c / lb) * H * W + h * W + w) * lb + c % lb;
  }
};

// Geometry, the lane block and the staging both kernels share. `other`:
// the layout of the activation beside the input (grad_output, output),
// whose block is taken first.
class DepthwiseBase : public Kernel {
 protected:
  DepthwiseBase(const ConvGeom& g, Layout x, Layout other, int threads)
      : g_(g), xb_(layout_block(x)), threads_(std::max(threads, 1)) {
    const int64_t ob = layout_block(other);
    B_ = ob > 1 ? ob : xb_ > 1 ? xb_ : preferred_channel_block();
    CB_ = (g.C + B_ - 1) / B_;
    KK_ = g.KH * g.KW;
    Hp_ = g.H + 2 * g.ph;
    p_.OH = g.OH, p_.OW = g.OW, p_.Wp = g.W + 2 * g.pw, p_.sh = g.sh, p_.sw = g.sw;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) p_.off.push_back((kh * g.dh * p_.Wp + kw * g.dw) * B_);
    parallel_ = CB_ > 1 && g.N * g.C * g.OH * g.OW * KK_ > (1 << 16);
  }

  // Per-thread scratch of `floats` floats each, zeroed: lanes past C and
  // the padding stay zero, since staging writes the interior's real lanes
  // only. Tiles start on a cache line, so every vector load is one line.
  static int64_t lines(int64_t floats) { return (floats + 15) / 16 * 16; }
  void alloc(int64_t floats) {
    per_thread_ = lines(floats);
    scratch_ = Buffer(sizeof(float) * size_t(threads_ * per_thread_));
    std::memset(scratch_.data(), 0, scratch_.size());
  }
  float* scratch(int t) const { return static_cast<float*>(scratch_.data()) + t * per_thread_; }

  // Channels [cb*B, cb*B + lanes) of sample n, an (h, w) image, into the
  // blocked tile `dst` (rows of wp pixels, the image at (ph, pw)).
  void stage(const float* src, const Addr& a, int64_t n, int64_t cb, int64_t lanes, int64_t h,
             int64_t w, int64_t ph, int64_t pw, int64_t wp, float* dst) const {
    const int64_t B = B_;
    if (a.lb == B) {  // the same blocking: rows are contiguous
      const float* s = src + a(n, cb * B, 0, 0);
      for (int64_t r = 0; r < h; ++r)
        std::memcpy(dst + ((r + ph) * wp + pw) * B, s + r * w * B, sizeof(float) * size_t(w * B));
      return;
    }
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t r = 0; r < h; ++r) {
        const float* s = src + a(n, cb * B + l, r, 0);
        float* d = dst + ((r + ph) * wp + pw) * B + l;
        if (a.lb == 1)
          for (int64_t c = 0; c < w; ++c) d[c * B] = s[c];
        else
          for (int64_t c = 0; c < w; ++c) d[c * B] = s[c * a.lb];
      }
  }

  // The blocked tile `src` (rows of w pixels) into channels [cb*B, cb*B +
  // lanes) of sample n of an (h, w) image in layout a.
  void unstage(const float* src, const Addr& a, int64_t n, int64_t cb, int64_t lanes, int64_t h,
               int64_t w, float* dst) const {
    const int64_t B = B_;
    if (a.lb == B) {
      std::memcpy(dst + a(n, cb * B, 0, 0), src, sizeof(float) * size_t(h * w * B));
      return;
    }
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t r = 0; r < h; ++r) {
        float* d = dst + a(n, cb * B + l, r, 0);
        const float* s = src + r * w * B + l;
        for (int64_t c = 0; c < w; ++c) d[c * a.lb] = s[c * B];
      }
  }

  ConvGeom g_;
  int64_t xb_, B_ = 16, CB_ = 0, KK_ = 0, Hp_ = 0;
  int threads_;
  Plan p_;
  bool parallel_ = false;
  int64_t per_thread_ = 0;
  Buffer scratch_;
};

class DepthwiseWgrad : public DepthwiseBase {
 public:
  DepthwiseWgrad(const ConvGeom& g, Layout x, Layout dy, bool want_bias, int threads)
      : DepthwiseBase(g, x, dy, threads), dyb_(layout_block(dy)), bias_(want_bias) {
    // Per thread: the padded input tile, grad_output's tile (unless it is
    // read in place), one sample's float sums.
    x_tile_ = lines(Hp_ * p_.Wp * B_);
    dy_tile_ = dyb_ == B_ ? 0 : lines(g.OH * g.OW * B_);
    sums_ = (KK_ + 1) * B_;
    alloc(x_tile_ + dy_tile_ + sums_);
    acc_.assign(size_t(CB_ * sums_), 0.0);
  }

  void run(const Tensor* in, Tensor* out) override;

 private:
  int64_t dyb_;
  bool bias_;
  int64_t x_tile_ = 0, dy_tile_ = 0, sums_ = 0;
  std::vector<double> acc_;  // per channel block: KK taps and the bias, B lanes each
};

void DepthwiseWgrad::run(const Tensor* in, Tensor* out) {
  float* dw = out[1].data ? out[1].as<float>() : nullptr;
  float* db = bias_ && out[2].data ? out[2].as<float>() : nullptr;
  if (!dw && !db) return;
  const float* dy = in[0].as<float>();
  const float* x = in[1].as<float>();
  const TapsFn f = B_ == 16 ? taps_for_isa<16>() : taps_for_isa<8>();
  const Addr ax{g_.C, g_.H, g_.W, xb_}, ady{g_.C, g_.OH, g_.OW, dyb_};
  parallel_region(parallel_, [&](int t, int nt) {
    int64_t cb0, cb1;
    split_range(CB_, t, nt, cb0, cb1);
    float* xs = scratch(t);
    float* ds = xs + x_tile_;
    float* sums = ds + dy_tile_;
    for (int64_t cb = cb0; cb < cb1; ++cb) {
      double* acc = acc_.data() + cb * sums_;
      std::fill(acc, acc + sums_, 0.0);
      const int64_t lanes = std::min(B_, g_.C - cb * B_);
      for (int64_t n = 0; n < g_.N; ++n) {
        stage(x, ax, n, cb, lanes, g_.H, g_.W, g_.ph, g_.pw, p_.Wp, xs);
        const float* d = ds;
        if (dy_tile_ == 0) d = dy + ady(n, cb * B_, 0, 0);
        else stage(dy, ady, n, cb, lanes, g_.OH, g_.OW, 0, 0, g_.OW, ds);
        std::fill(sums, sums + sums_, 0.0f);
        f(p_, d, xs, db != nullptr, sums);
        for (int64_t i = 0; i < sums_; ++i) acc[i] += sums[i];
      }
    }
  }, threads_);
  for (int64_t c = 0; c < g_.C; ++c) {
    const double* a = acc_.data() + (c / B_) * sums_ + c % B_;
    if (dw)
      for (int64_t t = 0; t < KK_; ++t) dw[c * KK_ + t] = static_cast<float>(a[t * B_]);
    if (db) db[c] = static_cast<float>(a[KK_ * B_]);
  }
}

class DepthwiseFwd : public DepthwiseBase {
 public:
  DepthwiseFwd(const ConvGeom& g, Layout x, Layout y, bool bias, int threads)
      : DepthwiseBase(g, x, y, threads), yb_(layout_block(y)), bias_(bias) {
    // Per thread: the padded input tile, the output's tile, the block's
    // weights as KK rows of B lanes and its bias.
    x_tile_ = lines(Hp_ * p_.Wp * B_);
    y_tile_ = lines(g.OH * g.OW * B_);
    w_tile_ = lines((KK_ + 1) * B_);
    alloc(x_tile_ + y_tile_ + w_tile_);
  }

  void run(const Tensor* in, Tensor* out) override {
    const float* x = in[0].as<float>();
    const float* w = in[1].as<float>();
    const float* b = bias_ ? in[2].as<float>() : nullptr;
    float* y = out[0].as<float>();
    const FwdFn f = B_ == 16 ? fwd_for_isa<16>() : fwd_for_isa<8>();
    const Addr ax{g_.C, g_.H, g_.W, xb_}, ay{g_.C, g_.OH, g_.OW, yb_};
    parallel_region(parallel_, [&](int t, int nt) {
      int64_t cb0, cb1;
      split_range(CB_, t, nt, cb0, cb1);
      float* xs = scratch(t);
      float* ys = xs + x_tile_;
      float* wt = ys + y_tile_;
      float* bt = wt + KK_ * B_;
      for (int64_t cb = cb0; cb < cb1; ++cb) {
        const int64_t lanes = std::min(B_, g_.C - cb * B_);
        for (int64_t l = 0; l < lanes; ++l) {
          const int64_t c = cb * B_ + l;
          for (int64_t k = 0; k < KK_; ++k) wt[k * B_ + l] = w[c * KK_ + k];
          bt[l] = b ? b[c] : 0.0f;
        }
        for (int64_t n = 0; n < g_.N; ++n) {
          stage(x, ax, n, cb, lanes, g_.H, g_.W, g_.ph, g_.pw, p_.Wp, xs);
          f(p_, xs, wt, bt, ys);
          unstage(ys, ay, n, cb, lanes, g_.OH, g_.OW, y);
        }
      }
    }, threads_);
  }

 private:
  int64_t yb_;
  bool bias_;
  int64_t x_tile_ = 0, y_tile_ = 0, w_tile_ = 0;
};

}  // namespace

bool depthwise_suits(const ConvGeom& g) {
  return g.G > 1 && g.G == g.C && g.O == g.C;
}

std::unique_ptr<Kernel> make_depthwise_fwd(const ConvGeom& g, Layout input, Layout output, bool bias,
                                           int threads) {
  return std::make_unique<DepthwiseFwd>(g, input, output, bias, threads);
}

std::unique_ptr<Kernel> make_depthwise_wgrad(const ConvGeom& g, Layout input, Layout grad_output,
                                             bool want_bias, int threads) {
  return std::make_unique<DepthwiseWgrad>(g, input, grad_output, want_bias, threads);
}

}  // namespace ts

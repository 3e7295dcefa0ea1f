#include "ops/conv_wgrad_c1.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/isa_target.h"
#include "ops/parallel.h"

namespace ts {
namespace {

// Kernel taps per pass over grad_output: their accumulators, grad_output's
// vector and the broadcast input value fit in 16 vector registers.
constexpr int kMaxTaps = 9;

struct Plan {
  int64_t N, O, OB, OH, OW, KK;
  int64_t Hp, Wp;  // the input as read: padded when the convolution pads
  int64_t sh, sw;
  std::vector<int64_t> off;  // per tap (kh, kw): its offset in the padded image
};

// out[t * B + l] += sum over (oh, ow) of dy[oh, ow, l] * xp[oh*sh*Wp +
// ow*sw + off[t]], for one sample and channel block, and with Bias also
// out[T * B + l] += the sum of dy[oh, ow, l] (one read of dy for both: it
// is the one operand that does not fit in cache). The sums are float over
// one sample's pixels; out (double) adds the samples.
template <int B, int T, bool Bias>
TS_INLINE void taps_pass(const float* dy, const float* xp, const int64_t* off, const Plan& p,
                         double* out) {
  using V = typename VecOf<B>::type;  // one channel block of grad_output at one pixel
  V acc[T + 1];
#pragma GCC unroll 16
  for (int t = 0; t <= T; ++t) acc[t] = V{};
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    const float* xr = xp + oh * p.sh * p.Wp;
    const float* d = dy + oh * p.OW * B;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      V g;
      std::memcpy(&g, d + ow * B, sizeof g);
      const float* x0 = xr + ow * p.sw;
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t] += g * x0[off[t]];
      if (Bias) acc[T] += g;
    }
  }
  for (int t = 0; t < (Bias ? T + 1 : T); ++t)
    for (int l = 0; l < B; ++l) out[t * B + l] += acc[t][l];
}

// taps_pass for a tap count n known only at run time (1..kMaxTaps).
template <int B, bool Bias, int T = kMaxTaps>
TS_INLINE void taps_any(int n, const float* dy, const float* xp, const int64_t* off,
                        const Plan& p, double* out) {
  if constexpr (T > 0) {
    if (n == T) return taps_pass<B, T, Bias>(dy, xp, off, p, out);
    taps_any<B, Bias, T - 1>(n, dy, xp, off, p, out);
  }
}

// Samples [n0, n1) into acc: per channel block, KK taps then the bias sum
// (taken in the last pass, whose taps sit just before it in acc).
template <int B>
TS_INLINE void samples(const Plan& p, const float* dy, const float* xp, int64_t n0, int64_t n1,
                       bool bias, double* acc) {
  const int64_t pix = p.OH * p.OW;
  for (int64_t n = n0; n < n1; ++n) {
    const float* xn = xp + n * p.Hp * p.Wp;
    for (int64_t ob = 0; ob < p.OB; ++ob) {
      const float* d = dy + (n * p.OB + ob) * pix * B;
      double* a = acc + ob * (p.KK + 1) * B;
      for (int64_t t0 = 0; t0 < p.KK; t0 += kMaxTaps) {
        const int taps = static_cast<int>(std::min<int64_t>(kMaxTaps, p.KK - t0));
        if (bias && t0 + taps == p.KK)
          taps_any<B, true>(taps, d, xn, p.off.data() + t0, p, a + t0 * B);
        else
          taps_any<B, false>(taps, d, xn, p.off.data() + t0, p, a + t0 * B);
      }
    }
  }
}

using SamplesFn = void (*)(const Plan&, const float*, const float*, int64_t, int64_t, bool,
                           double*);

template <int B>
void samples_base(const Plan& p, const float* dy, const float* xp, int64_t n0, int64_t n1,
                  bool bias, double* acc) {
  samples<B>(p, dy, xp, n0, n1, bias, acc);
}
#if TS_X86
template <int B>
TS_AVX512 void samples_avx512(const Plan& p, const float* dy, const float* xp, int64_t n0,
                              int64_t n1, bool bias, double* acc) {
  samples<B>(p, dy, xp, n0, n1, bias, acc);
}
#if !defined(__AVX2__)
template <int B>
TS_AVX2 void samples_avx2(const Plan& p, const float* dy, const float* xp, int64_t n0,
                          int64_t n1, bool bias, double* acc) {
  samples<B>(p, dy, xp, n0, n1, bias, acc);
}
#endif
#endif

// The build's baseline code, or a wider level's when the CPU has it on.
template <int B>
SamplesFn samples_for_isa() {
#if TS_X86
  if (cpu_isa() == CpuIsa::Avx512) return &samples_avx512<B>;
#if !defined(__AVX2__)
  if (cpu_isa() == CpuIsa::Avx2) return &samples_avx2<B>;
#endif
#endif
  return &samples_base<B>;
}

class OneChannelWgrad : public Kernel {
 public:
  OneChannelWgrad(const ConvGeom& g, Layout dy, bool want_bias, int threads)
      : block_(layout_block(dy)), bias_(want_bias), threads_(std::max(threads, 1)) {
    p_.N = g.N, p_.O = g.O, p_.OB = g.O / block_, p_.OH = g.OH, p_.OW = g.OW;
    p_.KK = g.KH * g.KW;
    p_.Hp = g.H + 2 * g.ph, p_.Wp = g.W + 2 * g.pw;
    p_.sh = g.sh, p_.sw = g.sw;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) p_.off.push_back(kh * g.dh * p_.Wp + kw * g.dw);
    H_ = g.H, W_ = g.W, ph_ = g.ph, pw_ = g.pw;
    // The padding stays zero: run() rewrites the interior only.
    if (g.ph || g.pw) pad_ = Buffer(sizeof(float) * size_t(g.N * p_.Hp * p_.Wp));
    per_thread_ = p_.OB * (p_.KK + 1) * block_;
    acc_.assign(size_t(threads_ * per_thread_), 0.0);
    parallel_ = g.N > 1 && g.N * g.O * g.OH * g.OW * p_.KK > (1 << 16);
  }

  void run(const Tensor* in, Tensor* out) override {
    float* dw = out[1].data ? out[1].as<float>() : nullptr;
    float* db = bias_ && out[2].data ? out[2].as<float>() : nullptr;
    if (!dw && !db) return;
    const float* dy = in[0].as<float>();
    const float* xp = pad_.data() ? padded(in[1].as<float>()) : in[1].as<float>();
    const SamplesFn f = block_ == 16 ? samples_for_isa<16>() : samples_for_isa<8>();
    int used = 1;
    parallel_region(parallel_, [&](int t, int nt) {
      if (t == 0) used = nt;
      int64_t b, e;
      split_range(p_.N, t, nt, b, e);
      double* acc = acc_.data() + t * per_thread_;
      std::fill(acc, acc + per_thread_, 0.0);
      f(p_, dy, xp, b, e, db != nullptr, acc);
    }, threads_);
    // Threads' partial sums in thread order; lane l of block ob is channel ob*B + l.
    for (int64_t o = 0; o < p_.O; ++o) {
      const int64_t base = (o / block_) * (p_.KK + 1) * block_ + o % block_;
      for (int64_t t = 0; t <= p_.KK; ++t) {
        if (t == p_.KK ? !db : !dw) continue;
        double s = 0;
        for (int th = 0; th < used; ++th) s += acc_[size_t(th * per_thread_ + base + t * block_)];
        (t == p_.KK ? db[o] : dw[o * p_.KK + t]) = static_cast<float>(s);
      }
    }
  }

 private:
  // x copied into the zero-padded buffer's interior.
  const float* padded(const float* x) {
    float* p = static_cast<float*>(pad_.data());
    parallel_for(p_.N, parallel_, [&](int64_t n) {
      for (int64_t h = 0; h < H_; ++h)
        std::memcpy(p + (n * p_.Hp + h + ph_) * p_.Wp + pw_, x + (n * H_ + h) * W_,
                    sizeof(float) * size_t(W_));
    });
    return p;
  }

  Plan p_;
  int64_t block_;
  bool bias_;
  int threads_;
  int64_t H_ = 0, W_ = 0, ph_ = 0, pw_ = 0;
  int64_t per_thread_ = 0;
  bool parallel_ = false;
  Buffer pad_;
  std::vector<double> acc_;  // per thread: per channel block, KK taps and the bias
};

}  // namespace

bool one_channel_wgrad_suits(const ConvGeom& g, Layout grad_output) {
  return g.nd == 2 && g.C == 1 && g.G == 1 &&
         (grad_output == Layout::Blocked8 || grad_output == Layout::Blocked16);
}

std::unique_ptr<Kernel> make_one_channel_wgrad(const ConvGeom& g, Layout grad_output,
                                               bool want_bias, int threads) {
  return std::make_unique<OneChannelWgrad>(g, grad_output, want_bias, threads);
}

}  // namespace ts

// Batch norm on channels-last bfloat16 activations, viewed as [N, S, C]:
// each row holds C contiguous channels, so the loops run across channels,
// converting up to kChunk of them at a time into a stack buffer.
//
// The arithmetic is the plain bfloat16 kernels' (batch_norm.cpp): sums in
// double, the forward's shifted by the channel's first element
// x[n=0, s=0, c]; float coefficients; one rounding of each output value.
// Only the order of the double sums differs.
//
// Pass 1 runs over units of R rows (a sample, or a part of one when there
// are few samples) in parallel and keeps each unit's per-channel sums in
// `part_` (sized at construction: run allocates nothing). The per-channel
// totals add the units' parts in unit order, and R depends on the shape
// only, so results do not depend on the thread count. Pass 2 applies the
// per-channel affine map over the same units.
#include "ops/batch_norm_nhwc.h"

#include "ops/bn_channel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/bf16_lanes.h"
#include "ops/parallel.h"
#include "trainstep/bfloat16.h"

namespace ts {

namespace {

// Channels converted at a time: 1 KiB of floats per buffer on the stack.
constexpr int64_t kChunk = 256;

// Rows converted at a time: with C <= kChunk, whole rows (contiguous)
// fill the buffer, so a narrow row does not pay a conversion call each.
int64_t rows_per_batch(int64_t C) { return C <= kChunk ? kChunk / std::max<int64_t>(C, 1) : 1; }

// Rows per unit: whole samples when there are enough to share among the
// threads; else parts of about 1/ceil(32/N) of a sample, of at least 16K
// values each (smaller parts cost more in partial sums than they save).
int64_t rows_per_unit(int64_t N, int64_t C, int64_t S) {
  constexpr int64_t kUnits = 32, kMinValues = int64_t{1} << 14;
  const int64_t splits = (kUnits + N - 1) / std::max<int64_t>(N, 1);
  int64_t r = (S + splits - 1) / splits;
  r = std::max(r, (kMinValues + C - 1) / std::max<int64_t>(C, 1));
  return std::max<int64_t>(1, std::min(r, S));
}

// unit_sums for C channels known at compile time: the same sums in the same
// order (rows in order, each channel's own accumulator), but the
// accumulators stay in registers and the conversion is inline, where the
// generic loop stores them to the stack for every row (C = 16 ran the
// bfloat16 backward slower than float32's blocked kernel).
template <int C>
void sums_fixed(const uint16_t* x, const uint16_t* dy, const double* m, int64_t rows, double* q) {
  double a[C] = {}, b[C] = {}, mm[C];
  std::copy(m, m + C, mm);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* px = x + r * C;
    if (!dy) {
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const double d = double(bf16_to_float(px[c])) - mm[c];
        a[c] += d;
        b[c] += d * d;
      }
    } else {
      const uint16_t* pd = dy + r * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const double g = bf16_to_float(pd[c]);
        a[c] += g;
        b[c] += (double(bf16_to_float(px[c])) - mm[c]) * g;
      }
    }
  }
  std::copy(a, a + C, q);
  std::copy(b, b + C, q + C);
}

// apply for C channels known at compile time (a multiple of 8): each row
// converted, mapped and rounded on 8-float lanes in registers, where the
// generic loop makes three passes through float buffers. The same float
// expressions, so the same bits.
template <int C>
void apply_fixed(const uint16_t* x, const uint16_t* dy, uint16_t* y, int64_t rows, const float* a,
                 const float* b, const float* k, const float* mf) {
  using F = BfLanes<8>::f;
  F av[C / 8], bv[C / 8], kv[C / 8], mv[C / 8];
  for (int j = 0; j < C / 8; ++j) {
    std::memcpy(&av[j], a + 8 * j, sizeof(F));
    std::memcpy(&bv[j], b + 8 * j, sizeof(F));
    if (dy) {
      std::memcpy(&kv[j], k + 8 * j, sizeof(F));
      std::memcpy(&mv[j], mf + 8 * j, sizeof(F));
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < C / 8; ++j) {
      const int64_t o = r * C + 8 * j;
      F v;
      load_bf16<8>(x + o, v);
      if (!dy) {
        v = v * av[j] + bv[j];
      } else {
        F g;
        load_bf16<8>(dy + o, g);
        v = (g - bv[j] - (v - mv[j]) * kv[j]) * av[j];
      }
      store_bf16<8>(y + o, v);
    }
}

class BnNhwcBf16Kernel : public Kernel {
 public:
  BnNhwcBf16Kernel(int64_t N, int64_t C, int64_t S, bool backward, bool train, double eps,
                   bool relu)
      : N_(N), C_(C), S_(S), R_(rows_per_unit(N, C, S)), per_n_((S + R_ - 1) / R_),
        units_(N * per_n_), backward_(backward), train_(train), relu_(relu), eps_(eps),
        step_{backward, train, eps, double(N * S)},
        part_(static_cast<size_t>(units_ * C * 2)), a_(C), b_(C), k_(C), mf_(C), m_(C) {}

  void run(const Tensor* in, Tensor* out) override {
    const uint16_t* x = in[backward_ ? 1 : 0].as<uint16_t>();
    const uint16_t* dy = backward_ ? in[0].as<uint16_t>() : nullptr;
    const bool par = units_ > 1 && N_ * S_ * C_ > (1 << 15);
    // Pass 1 (the eval forward needs no statistics).
    if (backward_ || train_) {
      for (int64_t c = 0; c < C_; ++c)
        m_[c] = backward_ ? step_.mean(in, c) : double(bf16_to_float(x[c]));  // shift: x[0, 0, c]
      parallel_for(units_, par, [&](int64_t u) { unit_sums(u, x, dy); });
    }
    coefficients(in, out);
    uint16_t* y = out[0].data ? out[0].as<uint16_t>() : nullptr;
    if (!y) return;
    parallel_for(units_, par, [&](int64_t u) { apply(u, x, dy, y); });
  }

 private:
  // The unit's rows [s0, s1) of sample n.
  void rows(int64_t u, int64_t& n, int64_t& s0, int64_t& s1) const {
    n = u / per_n_;
    s0 = (u % per_n_) * R_;
    s1 = std::min(S_, s0 + R_);
  }

  // Per channel: forward, sums of d and d * d for d = x - shift; backward,
  // of dy and (x - mean) * dy. Into part_[u] as (C sums, C sums).
  void unit_sums(int64_t u, const uint16_t* x, const uint16_t* dy) {
    int64_t n, s0, s1;
    rows(u, n, s0, s1);
    const int64_t C = C_;
    double* q = part_.data() + u * C * 2;
    const int64_t off = (n * S_ + s0) * C;
    switch (C) {  // the common widths, accumulators in registers
      case 16: return sums_fixed<16>(x + off, dy ? dy + off : nullptr, m_.data(), s1 - s0, q);
      case 32: return sums_fixed<32>(x + off, dy ? dy + off : nullptr, m_.data(), s1 - s0, q);
      case 64: return sums_fixed<64>(x + off, dy ? dy + off : nullptr, m_.data(), s1 - s0, q);
      default: break;
    }
    for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
      const int64_t len = std::min(kChunk, C - c0);
      const double* m = m_.data() + c0;
      double a[kChunk] = {}, b[kChunk] = {};
      float bufx[kChunk], bufd[kChunk];
      const int64_t rb = rows_per_batch(C);  // > 1 only when len == C
      for (int64_t s = s0; s < s1; s += rb) {
        const int64_t rows = std::min(rb, s1 - s);
        const int64_t off = (n * S_ + s) * C + c0;
        bf16_to_floats(x + off, bufx, rows * len);
        if (dy) bf16_to_floats(dy + off, bufd, rows * len);
        for (int64_t r = 0; r < rows; ++r) {  // rows in order: the sums' order is fixed
          const float* bx = bufx + r * len;
          const float* bd = bufd + r * len;
          if (!dy) {
#pragma omp simd
            for (int64_t c = 0; c < len; ++c) {
              const double d = double(bx[c]) - m[c];
              a[c] += d;
              b[c] += d * d;
            }
          } else {
#pragma omp simd
            for (int64_t c = 0; c < len; ++c) {
              const double g = bd[c];
              a[c] += g;
              b[c] += (double(bx[c]) - m[c]) * g;
            }
          }
        }
      }
      std::copy(a, a + len, q + c0);
      std::copy(b, b + len, q + C + c0);
    }
  }

  // The per-channel totals (units added in order), the saves or the
  // weight and bias gradients, and the coefficients of pass 2:
  // y = x * a + b (forward), dx = (dy - b - (x - mean) * k) * a (backward).
  void coefficients(const Tensor* in, Tensor* out) {
    const int64_t C = C_;
    for (int64_t c = 0; c < C; ++c) {
      double t1 = 0, t2 = 0;
      if (backward_ || train_)
        for (int64_t u = 0; u < units_; ++u) {
          t1 += part_[u * C * 2 + c];
          t2 += part_[u * C * 2 + C + c];
        }
      step_(in, out, c, t1, t2, m_[c], a_[c], b_[c], k_[c]);
      if (backward_) mf_[c] = float(m_[c]);
    }
  }

  void apply(int64_t u, const uint16_t* x, const uint16_t* dy, uint16_t* y) const {
    int64_t n, s0, s1;
    rows(u, n, s0, s1);
    const int64_t C = C_;
    if (C == 16 || C == 32 || C == 64) {  // the common widths, on lanes
      const int64_t off = (n * S_ + s0) * C, nr = s1 - s0;
      const uint16_t* d = dy ? dy + off : nullptr;
      if (C == 16) apply_fixed<16>(x + off, d, y + off, nr, a_.data(), b_.data(), k_.data(), mf_.data());
      if (C == 32) apply_fixed<32>(x + off, d, y + off, nr, a_.data(), b_.data(), k_.data(), mf_.data());
      if (C == 64) apply_fixed<64>(x + off, d, y + off, nr, a_.data(), b_.data(), k_.data(), mf_.data());
      if (relu_ && !dy) relu_bf16(y + off, nr * C);
      return;
    }
    float bx[kChunk], bd[kChunk];
    const int64_t rb = rows_per_batch(C);
    for (int64_t s = s0; s < s1; s += rb)
      for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
        const int64_t len = std::min(kChunk, C - c0), rows = std::min(rb, s1 - s);
        const int64_t off = (n * S_ + s) * C + c0;
        const float* a = a_.data() + c0;
        const float* b = b_.data() + c0;
        bf16_to_floats(x + off, bx, rows * len);
        if (!dy) {
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < len; ++c) bx[r * len + c] = bx[r * len + c] * a[c] + b[c];
          floats_to_bf16(bx, y + off, rows * len);
          if (relu_) relu_bf16(y + off, rows * len);
        } else {
          const float* k = k_.data() + c0;
          const float* mf = mf_.data() + c0;
          bf16_to_floats(dy + off, bd, rows * len);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < len; ++c) {
              float* g = bd + r * len + c;
              *g = (*g - b[c] - (bx[r * len + c] - mf[c]) * k[c]) * a[c];
            }
          floats_to_bf16(bd, y + off, rows * len);
        }
      }
  }

  int64_t N_, C_, S_;
  int64_t R_, per_n_, units_;  // rows per unit, units per sample, units
  bool backward_, train_, relu_;  // relu_: batch_norm_relu's forward
  double eps_;
  BnChannelStep step_;
  std::vector<double> part_;          // (units, 2, C) partial sums
  std::vector<float> a_, b_, k_, mf_;  // per-channel coefficients; mf_: float(mean)
  std::vector<double> m_;             // per-channel shift (forward) or mean (backward)
};

}  // namespace

std::unique_ptr<Kernel> make_bn_nhwc_bf16(int64_t N, int64_t C, int64_t S, bool backward,
                                          bool train, double eps, bool relu) {
  return std::make_unique<BnNhwcBf16Kernel>(N, C, S, backward, train, eps, relu);
}

}  // namespace ts

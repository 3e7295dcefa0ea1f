// trainstep.max_pool2d_code and its backward for any window geometry and
// any layouts of the values (pool.h): the torchvision ResNet stem's 3x3,
// stride-2, padding-1 pool after a relu, between channel-blocked
// convolutions. Windows that tile a plain or blocked input into plain
// values keep pool.cpp's faster kernels. bfloat16 (plain or channels-last,
// which plane_at sees as one block of all C channels) runs plane by plane.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "ops/parallel.h"
#include "ops/pool.h"
#include "trainstep/bfloat16.h"

namespace ts {
namespace pool_detail {
namespace {

// Where plane p (of N * C) of a rank-4 value starts, and its element step:
// plain, or channel-blocked (lane c % block of block c / block); a block of
// C channels is channels-last.
struct PlaneAt {
  int64_t base, step;
};
PlaneAt plane_at(int64_t p, int64_t C, int64_t hw, int64_t block) {
  if (block == 1) return {p * hw, 1};
  const int64_t n = p / C, c = p % C;
  return {(n * (C / block) + c / block) * hw * block + c % block, block};
}

// The window of output (oh, ow): its unclipped origin, and the range of
// its row and column indices i, j inside the input.
struct Window {
  int64_t h0, w0, i0, i1, j0, j1;
};
Window window(const PoolGeom& g, int64_t oh, int64_t ow) {
  Window r;
  r.h0 = oh * g.sh - g.ph, r.w0 = ow * g.sw - g.pw;
  auto range = [](int64_t a0, int64_t d, int64_t k, int64_t n, int64_t& lo, int64_t& hi) {
    lo = (first_in_bounds(a0, d) - a0) / d;
    hi = std::min<int64_t>(k, n - a0 <= 0 ? 0 : (n - a0 + d - 1) / d);  // a0 + i*d < n
  };
  range(r.h0, g.dh, g.kh, g.H, r.i0, r.i1);
  range(r.w0, g.dw, g.kw, g.W, r.j0, r.j1);
  return r;
}

uint8_t code_of(int64_t offset, float max) {
  return static_cast<uint8_t>(offset | (max <= 0.f ? 0 : kCodePass));  // NaN passes
}

// The values and codes of one plane (L = 1) or of 8 lanes of a channel
// block (a lane per channel, as one vector); elements xs and ys apart.
template <int L>
struct Lanes;
template <>
struct Lanes<1> {
  typedef float F;
  typedef int32_t I;
};
template <>
struct Lanes<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
};

template <int L>
void pool_lanes(const PoolGeom& g, const float* x, int64_t xs, float* y, int64_t ys,
                uint8_t* const* code) {
  using F = typename Lanes<L>::F;
  using I = typename Lanes<L>::I;
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window wd = window(g, oh, ow);
      F best = F{} - std::numeric_limits<float>::infinity();
      I at = I{} + static_cast<int32_t>(wd.i0 * g.kw + wd.j0);
      for (int64_t i = wd.i0; i < wd.i1; ++i)
        for (int64_t j = wd.j0; j < wd.j1; ++j) {
          F v;
          std::memcpy(&v, x + ((wd.h0 + i * g.dh) * g.W + wd.w0 + j * g.dw) * xs, sizeof v);
          // The general path's rule: a larger value, or any NaN, replaces the max.
          const auto take = (v > best) | (v != v);
          best = take ? v : best;
          at = take ? I{} + static_cast<int32_t>(i * g.kw + j) : at;
        }
      const int64_t o = oh * g.OW + ow;
      if constexpr (L == 1) {
        y[o * ys] = best;
        code[0][o] = code_of(at, best);
      } else {
        std::memcpy(y + o * ys, &best, sizeof best);
        for (int l = 0; l < L; ++l) code[l][o] = code_of(at[l], best[l]);
      }
    }
}

// Where code offset a lies from its window's origin: rows di[a], columns
// dj[a]; far outside for an offset past the window (a program can pass any
// bytes as codes, so every target is checked against the input).
struct CodeSteps {
  int64_t di[128], dj[128];
  explicit CodeSteps(const PoolGeom& g) {
    for (int64_t a = 0; a < 128; ++a) {
      const bool in = a < g.kh * g.kw;
      di[a] = in ? a / g.kw * g.dh : -(int64_t(1) << 40);
      dj[a] = in ? a % g.kw * g.dw : 0;
    }
  }
};

// The input element code k names for window (oh, ow): false when the
// relu blocks it, and (counting it in bad) when it lies outside the input.
bool code_target(const PoolGeom& g, const CodeSteps& cs, int64_t oh, int64_t ow, int k, int64_t& h,
                 int64_t& w, int64_t& bad) {
  if (!(k & kCodePass)) return false;
  h = oh * g.sh - g.ph + cs.di[k & (kCodePass - 1)];
  w = ow * g.sw - g.pw + cs.dj[k & (kCodePass - 1)];
  if (h >= 0 && h < g.H && w >= 0 && w < g.W) return true;
  ++bad;
  return false;
}

// grad_input += grad_output at each passing argmax: one plane (L = 1), or
// the L lanes of one block. Returns the number of passing codes that name
// no element of the input (skipped).
template <int L>
int64_t unpool_lanes(const PoolGeom& g, const float* go, int64_t gs, const uint8_t* const* code,
                     const CodeSteps& cs, float* gi, int64_t is) {
  int64_t bad = 0;
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t o = oh * g.OW + ow;
      for (int l = 0; l < L; ++l) {
        int64_t h, w;
        if (code_target(g, cs, oh, ow, code[l][o], h, w, bad)) gi[(h * g.W + w) * is + l] += go[o * gs + l];
      }
    }
  return bad;
}

// pool_lanes<1> over bfloat16 bits: the same rule on the widened values,
// and the max's own bits copied out (widening is exact, so the comparisons
// are the float32 path's).
void pool_plane_bf16(const PoolGeom& g, const uint16_t* x, int64_t xs, uint16_t* y, int64_t ys,
                     uint8_t* code) {
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const Window wd = window(g, oh, ow);
      float best = -std::numeric_limits<float>::infinity();
      uint16_t bits = 0xFF80;  // -inf, as the float32 path's empty window
      int32_t at = static_cast<int32_t>(wd.i0 * g.kw + wd.j0);
      for (int64_t i = wd.i0; i < wd.i1; ++i)
        for (int64_t j = wd.j0; j < wd.j1; ++j) {
          const uint16_t b = x[((wd.h0 + i * g.dh) * g.W + wd.w0 + j * g.dw) * xs];
          const float v = bf16_to_float(b);
          if (v > best || v != v) best = v, bits = b, at = static_cast<int32_t>(i * g.kw + j);
        }
      const int64_t o = oh * g.OW + ow;
      y[o * ys] = bits;
      code[o] = code_of(at, best);
    }
}

// unpool_lanes<1> for windows that do not overlap (code_geom refuses
// others for bfloat16): each input element takes at most one gradient, so
// it is copied, bits and all, where float32 would add it to 0.
int64_t unpool_plane_bf16(const PoolGeom& g, const uint16_t* go, int64_t gs, const uint8_t* code,
                          const CodeSteps& cs, uint16_t* gi, int64_t is) {
  int64_t bad = 0;
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t o = oh * g.OW + ow;
      int64_t h, w;
      if (code_target(g, cs, oh, ow, code[o], h, w, bad)) gi[(h * g.W + w) * is] = go[o * gs];
    }
  return bad;
}

// Channels-last: the windows of one output row of sample n, all C channels
// side by side (contiguous in the input), kChanChunk at a time, so the
// per-channel compare and select vectorise; y in nhwc (y_last) or plain.
constexpr int64_t kChanChunk = 64;

void pool_row_nhwc_bf16(const PoolGeom& g, int64_t C, int64_t n, int64_t oh, const uint16_t* x,
                        uint16_t* y, bool y_last, uint8_t* code) {
  const int64_t out = g.OH * g.OW;
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    const Window wd = window(g, oh, ow);
    const int64_t o = oh * g.OW + ow;
    for (int64_t c0 = 0; c0 < C; c0 += kChanChunk) {
      const int64_t nc = std::min(kChanChunk, C - c0);
      float best[kChanChunk];
      uint16_t bits[kChanChunk];
      int32_t at[kChanChunk];
      for (int64_t c = 0; c < nc; ++c)
        best[c] = -std::numeric_limits<float>::infinity(), bits[c] = 0xFF80,
        at[c] = static_cast<int32_t>(wd.i0 * g.kw + wd.j0);
      for (int64_t i = wd.i0; i < wd.i1; ++i)
        for (int64_t j = wd.j0; j < wd.j1; ++j) {
          const int64_t h = wd.h0 + i * g.dh, w = wd.w0 + j * g.dw;
          const uint16_t* xp = x + ((n * g.H + h) * g.W + w) * C + c0;
          const int32_t a = static_cast<int32_t>(i * g.kw + j);
          for (int64_t c = 0; c < nc; ++c) {
            const float v = bf16_to_float(xp[c]);
            const bool take = (v > best[c]) | (v != v);
            best[c] = take ? v : best[c];
            bits[c] = take ? xp[c] : bits[c];
            at[c] = take ? a : at[c];
          }
        }
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t plane = n * C + c0 + c;
        y[y_last ? (n * out + o) * C + c0 + c : plane * out + o] = bits[c];
        code[plane * out + o] = code_of(at[c], best[c]);
      }
    }
  }
}

// The backward of one output row of sample n, grad_input channels-last:
// grad_output nhwc (go_last) or plain. Windows do not overlap, so rows
// write disjoint elements.
int64_t unpool_row_nhwc_bf16(const PoolGeom& g, int64_t C, int64_t n, int64_t oh, const uint16_t* go,
                             bool go_last, const uint8_t* code, const CodeSteps& cs, uint16_t* gi) {
  const int64_t out = g.OH * g.OW;
  int64_t bad = 0;
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    const int64_t o = oh * g.OW + ow;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t plane = n * C + c;
      int64_t h, w;
      if (code_target(g, cs, oh, ow, code[plane * out + o], h, w, bad))
        gi[((n * g.H + h) * g.W + w) * C + c] = go[go_last ? (n * out + o) * C + c : plane * out + o];
    }
  }
  return bad;
}

}  // namespace

bool windows_overlap(const PoolGeom& g) {
  return g.sh < (g.kh - 1) * g.dh + 1 || g.sw < (g.kw - 1) * g.dw + 1;
}

void max_pool_code_any(const PoolGeom& g, int64_t C, int64_t x_block, int64_t y_block,
                       const uint16_t* x, uint16_t* y, uint8_t* code) {
  const int64_t in = g.H * g.W, out = g.OH * g.OW;
  if (x_block == C && C > 1 && (y_block == C || y_block == 1)) {  // channels-last input
    const int64_t N = g.planes / C;
    parallel_for(N * g.OH, true, [&](int64_t r) {
      pool_row_nhwc_bf16(g, C, r / g.OH, r % g.OH, x, y, y_block == C, code);
    });
    return;
  }
  parallel_for(g.planes, true, [&](int64_t p) {
    const PlaneAt xa = plane_at(p, C, in, x_block), ya = plane_at(p, C, out, y_block);
    pool_plane_bf16(g, x + xa.base, xa.step, y + ya.base, ya.step, code + p * out);
  });
}

int64_t max_pool_code_any_backward(const PoolGeom& g, int64_t C, int64_t go_block,
                                   int64_t gi_block, const uint16_t* go, const uint8_t* code,
                                   uint16_t* gi) {
  const int64_t in = g.H * g.W, out = g.OH * g.OW, n = g.planes * in;
  const CodeSteps cs(g);
  std::atomic<int64_t> bad{0};
  parallel_for((n + 4095) / 4096, true, [&](int64_t k) {
    std::fill(gi + k * 4096, gi + std::min(n, (k + 1) * 4096), uint16_t{0});
  });
  if (gi_block == C && C > 1 && (go_block == C || go_block == 1)) {  // channels-last grad_input
    const int64_t N = g.planes / C;
    parallel_for(N * g.OH, true, [&](int64_t r) {
      bad += unpool_row_nhwc_bf16(g, C, r / g.OH, r % g.OH, go, go_block == C, code, cs, gi);
    });
    return bad;
  }
  parallel_for(g.planes, true, [&](int64_t p) {
    const PlaneAt ga = plane_at(p, C, out, go_block), ia = plane_at(p, C, in, gi_block);
    bad += unpool_plane_bf16(g, go + ga.base, ga.step, code + p * out, cs, gi + ia.base, ia.step);
  });
  return bad;
}

void max_pool_code_any(const PoolGeom& g, int64_t C, int64_t x_block, int64_t y_block,
                       const float* x, float* y, uint8_t* code) {
  const int64_t in = g.H * g.W, out = g.OH * g.OW;
  if (x_block == y_block && x_block > 1) {  // whole blocks: lanes side by side
    const int64_t B = x_block;
    parallel_for(g.planes / B, true, [&](int64_t b) {
      const int64_t p0 = b * B;  // planes p0 .. p0 + B: one block
      uint8_t* codes[16];
      for (int64_t l = 0; l < B; ++l) codes[l] = code + (p0 + l) * out;
      const PlaneAt xa = plane_at(p0, C, in, B), ya = plane_at(p0, C, out, B);
      // 8 lanes at a time: a 16-float vector's selects compile to slow code
      // for the AVX2 baseline (6x slower than two 8-lane passes here).
      for (int64_t h = 0; h < B; h += 8)
        pool_lanes<8>(g, x + xa.base + h, B, y + ya.base + h, B, codes + h);
    });
    return;
  }
  parallel_for(g.planes, true, [&](int64_t p) {
    uint8_t* codes[1] = {code + p * out};
    const PlaneAt xa = plane_at(p, C, in, x_block), ya = plane_at(p, C, out, y_block);
    pool_lanes<1>(g, x + xa.base, xa.step, y + ya.base, ya.step, codes);
  });
}

int64_t max_pool_code_any_backward(const PoolGeom& g, int64_t C, int64_t go_block,
                                   int64_t gi_block, const float* go, const uint8_t* code,
                                   float* gi) {
  const int64_t in = g.H * g.W, out = g.OH * g.OW, n = g.planes * in;
  const CodeSteps cs(g);
  std::atomic<int64_t> bad{0};
  parallel_for((n + 4095) / 4096, true, [&](int64_t k) {
    std::fill(gi + k * 4096, gi + std::min(n, (k + 1) * 4096), 0.f);
  });
  if (go_block == gi_block && go_block > 1) {
    const int64_t B = go_block;
    parallel_for(g.planes / B, true, [&](int64_t b) {
      const int64_t p0 = b * B;
      const uint8_t* codes[16];
      for (int64_t l = 0; l < B; ++l) codes[l] = code + (p0 + l) * out;
      const PlaneAt ga = plane_at(p0, C, out, B), ia = plane_at(p0, C, in, B);
      bad += B == 16 ? unpool_lanes<16>(g, go + ga.base, 16, codes, cs, gi + ia.base, 16)
                     : unpool_lanes<8>(g, go + ga.base, 8, codes, cs, gi + ia.base, 8);
    });
    return bad;
  }
  // One plane per task: planes never share an element, so tasks never
  // write the same float.
  parallel_for(g.planes, true, [&](int64_t p) {
    const uint8_t* codes[1] = {code + p * out};
    const PlaneAt ga = plane_at(p, C, out, go_block), ia = plane_at(p, C, in, gi_block);
    bad += unpool_lanes<1>(g, go + ga.base, ga.step, codes, cs, gi + ia.base, ia.step);
  });
  return bad;
}

}  // namespace pool_detail
}  // namespace ts

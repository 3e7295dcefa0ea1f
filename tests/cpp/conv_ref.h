// A convolution case's geometry and attributes, and naive double-precision
// references for its outputs and gradients, one element at a time (so large
// cases can be sampled). Shared by the convolution tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/conv_transpose.h"

namespace ts_test {

struct ConvCase {
  int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G;
  bool bias;
  int64_t OH() const { return (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1; }
  json attrs() const {
    return {{"stride", {sh, sw}}, {"padding", {ph, pw}}, {"dilation", {dh, dw}},
            {"transposed", false}, {"output_padding", {0, 0}}, {"groups", G}};
  }
  json bwd_attrs(bool gi, bool gw, bool gb) const {
    json a = attrs();
    a["bias_sizes"] = bias ? json::array({O}) : json(nullptr);
    a["output_mask"] = {gi, gw, gb};
    return a;
  }
};

// Naive references, one element at a time (so large cases can be sampled).
struct Ref {
  const ConvCase& c;
  const float *x, *w, *b, *go;
  int64_t Cg() const { return c.C / c.G; }
  int64_t Og() const { return c.O / c.G; }
  float xat(int64_t n, int64_t ch, int64_t h, int64_t ww) const {
    if (h < 0 || h >= c.H || ww < 0 || ww >= c.W) return 0.f;
    return x[((n * c.C + ch) * c.H + h) * c.W + ww];
  }
  float wat(int64_t o, int64_t ci, int64_t kh, int64_t kw) const {
    return w[((o * Cg() + ci) * c.KH + kh) * c.KW + kw];
  }
  float goat(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    return go[((n * c.O + o) * c.OH() + oh) * c.OW() + ow];
  }
  double y(int64_t n, int64_t o, int64_t oh, int64_t ow) const {
    double s = b ? b[o] : 0.0;
    int64_t g = o / Og();
    for (int64_t ci = 0; ci < Cg(); ++ci)
      for (int64_t kh = 0; kh < c.KH; ++kh)
        for (int64_t kw = 0; kw < c.KW; ++kw)
          s += double(xat(n, g * Cg() + ci, oh * c.sh - c.ph + kh * c.dh,
                          ow * c.sw - c.pw + kw * c.dw)) * wat(o, ci, kh, kw);
    return s;
  }
  double gx(int64_t n, int64_t ch, int64_t ih, int64_t iw) const {
    double s = 0;
    int64_t g = ch / Cg(), ci = ch % Cg();
    for (int64_t o = g * Og(); o < (g + 1) * Og(); ++o)
      for (int64_t kh = 0; kh < c.KH; ++kh)
        for (int64_t kw = 0; kw < c.KW; ++kw) {
          int64_t th = ih + c.ph - kh * c.dh, tw = iw + c.pw - kw * c.dw;
          if (th < 0 || tw < 0 || th % c.sh || tw % c.sw) continue;
          int64_t oh = th / c.sh, ow = tw / c.sw;
          if (oh >= c.OH() || ow >= c.OW()) continue;
          s += double(goat(n, o, oh, ow)) * wat(o, ci, kh, kw);
        }
    return s;
  }
  double gw(int64_t o, int64_t ci, int64_t kh, int64_t kw) const {
    double s = 0;
    int64_t g = o / Og();
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t oh = 0; oh < c.OH(); ++oh)
        for (int64_t ow = 0; ow < c.OW(); ++ow)
          s += double(goat(n, o, oh, ow)) *
               xat(n, g * Cg() + ci, oh * c.sh - c.ph + kh * c.dh, ow * c.sw - c.pw + kw * c.dw);
    return s;
  }
  double gb(int64_t o) const {
    double s = 0;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t i = 0; i < c.OH() * c.OW(); ++i) s += go[(n * c.O + o) * c.OH() * c.OW() + i];
    return s;
  }
};

// NCHW <-> nChw{B}c (to_blocked: plain in, blocked out), one index map.
inline ts::HostTensor reblock(const ts::HostTensor& in, int64_t B, bool to_blocked) {
  const ts::Shape& s = in.view.shape;
  const int64_t N = s[0], C = s[1], pix = s[2] * s[3];
  ts::HostTensor out(ts::DType::F32, s);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < pix; ++i) {
        const int64_t plain = (n * C + c) * pix + i;
        const int64_t blocked = ((n * (C / B) + c / B) * pix + i) * B + c % B;
        out.view.as<float>()[to_blocked ? blocked : plain] = f32(in)[to_blocked ? plain : blocked];
      }
  return out;
}
inline ts::HostTensor to_blocked(const ts::HostTensor& plain, int64_t B) {
  return reblock(plain, B, true);
}
inline ts::HostTensor from_blocked(const ts::HostTensor& blocked, int64_t B) {
  return reblock(blocked, B, false);
}

// The kernels' geometry (ops/conv_transpose.h) of a 2-D case.
inline ts::ConvGeom geom(const ConvCase& c) {
  ts::ConvGeom g;
  g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.O = c.O, g.KH = c.KH, g.KW = c.KW, g.G = c.G;
  g.OH = c.OH(), g.OW = c.OW(), g.sh = c.sh, g.sw = c.sw, g.ph = c.ph, g.pw = c.pw;
  g.dh = c.dh, g.dw = c.dw;
  return g;
}

// 3x3 stride-1 cases for the Winograd kernels (N, C, H, W, O, ph, pw,
// bias): MNIST's conv2 smaller, partial edge tiles, padding 2 and 0, more
// inputs than outputs, tiles over several blocks, a 1x1 output, and 3
// channel blocks of 8 (the float32 kernels' nChw8c only).
inline const std::vector<ConvCase>& winograd_cases() {
  static const std::vector<ConvCase> cases = {
      {2, 32, 12, 12, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},
      {3, 16, 9, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},
      {2, 16, 8, 11, 48, 3, 3, 1, 1, 2, 0, 1, 1, 1, true},
      {1, 48, 5, 6, 16, 3, 3, 1, 1, 1, 2, 1, 1, 1, true},
      {5, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},
      {2, 16, 3, 3, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1, false},
      {2, 8, 6, 5, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}};
  return cases;
}

// "N2 C32 O64 H12 W12 p0,0": a case in a test's trace.
inline std::string case_name(const ConvCase& c) {
  return "N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " O" + std::to_string(c.O) +
         " H" + std::to_string(c.H) + " W" + std::to_string(c.W) + " p" + std::to_string(c.ph) +
         "," + std::to_string(c.pw);
}

// grad_weight and grad_bias of a convolution with one input channel per
// group (one channel; depthwise) against the reference: the sums run over
// up to tens of thousands of terms of size ~1, so the bound is relative to
// that count too.
inline void expect_conv_weight_grads(const ConvCase& c, const Ref& r, const float* gw, const float* gb) {
  const double terms = double(c.N) * c.OH() * c.OW();
  const double tol = 1e-6 * std::sqrt(terms) + 1e-5;
  for (int64_t o = 0; o < c.O; ++o) {
    for (int64_t kh = 0; kh < c.KH; ++kh)
      for (int64_t kw = 0; kw < c.KW; ++kw) {
        const double want = r.gw(o, 0, kh, kw);
        ASSERT_NEAR(gw[(o * c.KH + kh) * c.KW + kw], want, tol * (1 + std::fabs(want)))
            << "grad_weight " << o << "," << kh << "," << kw;
      }
    if (gb) {
      ASSERT_NEAR(gb[o], r.gb(o), tol * (1 + std::fabs(r.gb(o)))) << "grad_bias " << o;
    }
  }
}

}  // namespace ts_test

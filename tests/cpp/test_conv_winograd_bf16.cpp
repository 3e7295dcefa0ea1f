// The bfloat16 Winograd F(2x2, 3x3) convolution backward
// (src/ops/conv_winograd_bf16.h) against the double-precision reference of
// the same bf16 inputs, for both thread counts: the input gradient (relu
// mask, written over x), the weight and bias gradients; and the
// convolution backward ops on channels-last bf16 activations with each
// candidate forced; and what a non-finite grad_output gives. Skipped on a
// CPU without AVX512_BF16 (it is never offered there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "conv_ref.h"
#include "op_test_util.h"
#include "ops/conv_winograd_bf16.h"
#include "ops/kernel_choice.h"
#include "test_util.h"
#include "trainstep/bfloat16.h"
#include "trainstep/cpu.h"

using namespace ts_test;
using ts::HostTensor;

namespace {

// The float32 kernels' cases with whole vectors of 16 channels, and 3
// tiles: an odd last pair for the weight gradient. Output channels that
// are an odd number of 16s run the one-vector register tiles.
std::vector<ConvCase> bf16_cases() {
  std::vector<ConvCase> out;
  for (const ConvCase& c : winograd_cases())
    if (c.C % 16 == 0 && c.O % 16 == 0) out.push_back(c);
  out.push_back({1, 16, 3, 7, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1, false});  // 1 x 5 outputs
  return out;
}
const std::vector<ConvCase> kCases = bf16_cases();

std::string name(const ConvCase& c) { return case_name(c); }

// Random values already bf16 (float32 tensor): what the kernel reads is
// what the reference computes with.
HostTensor random_bf16_values(const ts::Shape& s, std::mt19937& rng) {
  HostTensor t = random_f32(s, rng);
  for (int64_t i = 0; i < t.view.numel(); ++i)
    t.view.as<float>()[i] = ts::bf16_to_float(ts::float_to_bf16(t.view.as<float>()[i]));
  return t;
}

// NCHW float32 <-> NHWC bfloat16, one index map (to_nhwc rounds; the
// tests' values are bf16 already).
HostTensor nhwc(const HostTensor& t, bool to) {
  const ts::Shape& s = t.view.shape;
  const int64_t N = s[0], C = s[1], P = s[2] * s[3];
  HostTensor out(to ? ts::DType::BF16 : ts::DType::F32, s);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < P; ++i) {
        const int64_t plain = (n * C + c) * P + i, last = (n * P + i) * C + c;
        if (to)
          out.view.as<uint16_t>()[last] = ts::float_to_bf16(f32(t)[plain]);
        else
          out.view.as<float>()[plain] = ts::bf16_to_float(t.view.as<uint16_t>()[last]);
      }
  return out;
}
HostTensor to_nhwc(const HostTensor& t) { return nhwc(t, true); }
HostTensor from_nhwc(const HostTensor& t) { return nhwc(t, false); }
HostTensor to_bf16(const HostTensor& t) {  // same layout
  HostTensor out(ts::DType::BF16, t.view.shape);
  for (int64_t i = 0; i < t.view.numel(); ++i)
    out.view.as<uint16_t>()[i] = ts::float_to_bf16(f32(t)[i]);
  return out;
}
float bf(const HostTensor& t, int64_t i) { return ts::bf16_to_float(t.view.as<uint16_t>()[i]); }

// Checks got[i] against want(i) for i < n: within half a bf16 ulp of the
// result (its one rounding), plus kRms of the reference's root mean
// square. The second term is the Winograd operands' own bf16 rounding: each
// output sums 16 x (channels) products of transformed values, each off by
// up to 2^-8 relative, so the error grows with the output's scale, not its
// value. Measured on these cases: at most 2.2 % of the rms, against 0.2 %
// for a direct product's one rounding (a wrong index or a dropped tile is
// off by about 100 %).
constexpr double kRms = 0.05;
template <class Got, class Want>
void expect_close(int64_t n, Got got, Want want, const char* what) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += want(i) * want(i);
  const double rms = std::sqrt(ss / double(std::max<int64_t>(n, 1)));
  for (int64_t i = 0; i < n; ++i) {
    const double w = want(i);
    ASSERT_NEAR(got(i), w, kRms * rms + std::ldexp(std::fabs(w), -8)) << what << " " << i;
  }
}

// grad_input (channels-last bf16) against the reference; 0 where relu's
// mask is (x <= 0).
void expect_grad_input(const ConvCase& c, const Ref& r, const HostTensor& x,
                       const HostTensor& gx_nhwc, bool mask) {
  HostTensor gx = from_nhwc(gx_nhwc);
  expect_close(
      gx.view.numel(), [&](int64_t i) { return f32(gx)[i]; },
      [&](int64_t i) {
        const int64_t iw = i % c.W, ih = i / c.W % c.H;
        const int64_t ch = i / (c.W * c.H) % c.C, n = i / (c.W * c.H * c.C);
        return mask && f32(x)[i] <= 0.f ? 0.0 : r.gx(n, ch, ih, iw);
      },
      "grad_input");
}

// grad_weight (OIHW bf16), and grad_bias (bf16, or null): plain float32
// sums rounded once, so half an ulp and the sum's own error.
void expect_grad_weight(const ConvCase& c, const Ref& r, const HostTensor& gw,
                        const HostTensor* gb) {
  expect_close(
      gw.view.numel(), [&](int64_t i) { return bf(gw, i); },
      [&](int64_t i) { return r.gw(i / (9 * c.C), i / 9 % c.C, i % 9 / 3, i % 3); },
      "grad_weight");
  if (gb) {
    for (int64_t o = 0; o < c.O; ++o)
      ASSERT_NEAR(bf(*gb, o), r.gb(o), std::ldexp(std::fabs(r.gb(o)), -8) + 1e-3) << o;
  }
}

bool skip() { return !ts::winograd_bf16_available(); }
#define SKIP_WITHOUT_BF16 \
  if (skip()) GTEST_SKIP() << "this CPU has no AVX512_BF16 (or TRAINSTEP_ISA is below avx512)"

}  // namespace

TEST(WinogradBf16, InputGradientMatchesDoubleReference) {
  SKIP_WITHOUT_BF16;
  std::mt19937 rng(22);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_bf16_values({c.N, c.C, c.H, c.W}, rng);  // about half <= 0
    HostTensor w = random_bf16_values({c.O, c.C, 3, 3}, rng);
    HostTensor dy = random_bf16_values({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    HostTensor dyh = to_nhwc(dy), xh = to_nhwc(x), wh = to_bf16(w);
    for (int threads : {1, 2})
      for (bool mask : {false, true}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + (mask ? " relu mask, over x" : ""));
        auto k = ts::make_winograd_bf16_bwd_data(geom(c), mask, threads);
        HostTensor xin(ts::DType::BF16, xh.view.shape), fresh(ts::DType::BF16, xh.view.shape);
        std::memcpy(xin.view.data, xh.view.data, xh.view.nbytes());
        HostTensor& gxh = mask ? xin : fresh;  // the masked form writes over x
        ts::Tensor in[3] = {dyh.view, xin.view, wh.view};
        ts::Tensor out[3] = {gxh.view, ts::Tensor{}, ts::Tensor{}};
        k->run(in, out);
        expect_grad_input(c, r, x, gxh, mask);
      }
  }
}

TEST(WinogradBf16, WeightGradientMatchesDoubleReference) {
  SKIP_WITHOUT_BF16;
  std::mt19937 rng(23);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_bf16_values({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_bf16_values({c.O, c.C, 3, 3}, rng);
    HostTensor dy = random_bf16_values({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    HostTensor dyh = to_nhwc(dy), xh = to_nhwc(x), wh = to_bf16(w);
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      auto k = ts::make_winograd_bf16_bwd_weight(geom(c), c.bias, threads);
      HostTensor gw(ts::DType::BF16, w.view.shape), gb(ts::DType::BF16, {c.O});
      ts::Tensor in[3] = {dyh.view, xh.view, wh.view};
      ts::Tensor out[3] = {ts::Tensor{}, gw.view, c.bias ? gb.view : ts::Tensor{}};
      k->run(in, out);
      expect_grad_weight(c, r, gw, c.bias ? &gb : nullptr);
    }
  }
}

TEST(WinogradBf16, SuitsThreeByThreeStrideOneWholeVectors) {
  auto with = [](auto change) {
    ts::ConvGeom g = geom(kCases[0]);
    change(g);
    return ts::winograd_bf16_suits(g);
  };
  EXPECT_TRUE(with([](ts::ConvGeom&) {}));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.KH = g.KW = 5; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.sh = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.dw = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.G = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.C = 24; }));  // not whole vectors of 16
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.O = 8; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.ph = 3; }));  // the input gradient's padding < 0
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.nd = 1; }));
}

// TRAINSTEP_ISA below avx512 turns the kernels off: they are AVX-512 code.
TEST(WinogradBf16, OffBelowAvx512) {
  SKIP_WITHOUT_BF16;
  const ts::CpuIsa was = ts::cpu_isa();
  ts::limit_cpu_isa(ts::CpuIsa::Avx2);
  EXPECT_FALSE(ts::winograd_bf16_available());
  ts::limit_cpu_isa(was);
  EXPECT_TRUE(ts::winograd_bf16_available());
}

// The backward ops as the runtime builds them on channels-last bf16
// activations, each candidate forced and measured, against the reference,
// with and without the relu mask.
TEST(WinogradBf16, ConvBackwardOpsWithEachCandidate) {
  SKIP_WITHOUT_BF16;
  std::mt19937 rng(24);
  for (const ConvCase& c : {kCases[2], kCases[4]}) {
    SCOPED_TRACE(name(c));
    HostTensor a = random_bf16_values({c.N, c.C, c.H, c.W}, rng);
    HostTensor x(ts::DType::F32, a.view.shape);  // relu's output: the backward's mask
    for (int64_t i = 0; i < a.view.numel(); ++i) x.view.as<float>()[i] = std::max(f32(a)[i], 0.f);
    HostTensor w = random_bf16_values({c.O, c.C, 3, 3}, rng);
    HostTensor dy = random_bf16_values({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    HostTensor xh = to_nhwc(x), dyh = to_nhwc(dy), wh = to_bf16(w);
    auto run = [](const char* op, const json& attrs, const std::vector<const HostTensor*>& in,
                  const std::string& kernel) {
      OpHarness h(op, attrs, in);
      const auto picks = h.kernel().choices();
      EXPECT_FALSE(picks.empty()) << op;
      for (const ts::KernelChoice* k : picks) {
        const std::string got = k->names[k->pick];
        if (kernel == "winograd") {
          EXPECT_EQ(got, "winograd") << op << " " << k->key;
        }
        if (kernel == "onednn") {  // named with its implementation, which names the ISA
          EXPECT_EQ(got.rfind("onednn ", 0), 0u) << got;
        }
      }
      return h.run(in);
    };
    for (const char* kernel : {"onednn", "winograd", "measure"}) {
      SCOPED_TRACE(kernel);
      EnvVar force("TRAINSTEP_KERNELS", kernel);
      EnvVar no_cache("TRAINSTEP_CACHE", "");
      ts::forget_kernel_choices();
      for (const char* op : {"aten.convolution_backward.default", "trainstep.conv_backward_relu"}) {
        SCOPED_TRACE(op);
        json attrs = c.bwd_attrs(true, true, true);
        attrs["in_layouts"] = {"nhwc", "nhwc", "plain"};
        attrs["out_layouts"] = {"nhwc", "plain", "plain"};
        HostTensor xin(ts::DType::BF16, xh.view.shape);  // the relu form may overwrite it
        std::memcpy(xin.view.data, xh.view.data, xh.view.nbytes());
        auto g = run(op, attrs, {&dyh, &xin, &wh}, kernel);
        const bool relu = std::string(op) != "aten.convolution_backward.default";
        expect_grad_input(c, r, x, g[0], relu);
        expect_grad_weight(c, r, g[1], &g[2]);
      }
    }
  }
}

// A non-finite grad_output stays non-finite in the input gradients that
// read it and in the weight gradient (which, and NaN or inf, is not
// eager's: a tile's transforms mix its 16 inputs).
TEST(WinogradBf16, NonFiniteGradOutputGivesNonFiniteGradients) {
  SKIP_WITHOUT_BF16;
  const ConvCase c = kCases[1];  // 16 -> 16, padding 1
  std::mt19937 rng(25);
  HostTensor x = random_bf16_values({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_bf16_values({c.O, c.C, 3, 3}, rng);
  HostTensor dy = random_bf16_values({c.N, c.O, c.OH(), c.OW()}, rng);
  const int64_t at = ((1 * c.O + 3) * c.OH() + 4) * c.OW() + 2;  // n 1, channel 3, (4, 2)
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    dy.view.as<float>()[at] = bad;
    HostTensor dyh = to_nhwc(dy), xh = to_nhwc(x), wh = to_bf16(w);
    HostTensor gxh(ts::DType::BF16, xh.view.shape), gw(ts::DType::BF16, w.view.shape);
    ts::Tensor in[3] = {dyh.view, xh.view, wh.view};
    ts::Tensor out[3] = {gxh.view, gw.view, ts::Tensor{}};
    ts::make_winograd_bf16_bwd_data(geom(c), false, 1)->run(in, out);
    ts::make_winograd_bf16_bwd_weight(geom(c), false, 1)->run(in, out);
    HostTensor gx = from_nhwc(gxh);
    for (int64_t ch = 0; ch < c.C; ++ch)  // every input the 3x3 window at (4, 2) reads
      for (int64_t ih = 3; ih <= 5; ++ih)
        for (int64_t iw = 1; iw <= 3; ++iw)
          ASSERT_FALSE(std::isfinite(f32(gx)[((1 * c.C + ch) * c.H + ih) * c.W + iw]))
              << "grad_input " << ch << " at " << ih << "," << iw;
    for (int64_t ci = 0; ci < c.C; ++ci)  // output channel 3's weights read it
      for (int64_t t = 0; t < 9; ++t)
        ASSERT_FALSE(std::isfinite(bf(gw, (3 * c.C + ci) * 9 + t))) << "grad_weight " << ci;
  }
}

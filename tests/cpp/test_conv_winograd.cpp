// The Winograd F(2x2, 3x3) convolution (src/ops/conv_winograd.h) against
// the double-precision reference at every ISA level, for both channel
// blocks and thread counts: the forward (bias, relu), the input gradient
// (relu mask, written over x) and the weight and bias gradients; and the convolution ops with it forced and
// with oneDNN (TRAINSTEP_KERNELS) on blocked activations, so both paths run
// on any machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "conv_ref.h"
#include "isa_levels.h"
#include "op_test_util.h"
#include "ops/conv_winograd.h"
#include "ops/kernel_choice.h"
#include "test_util.h"

using namespace ts_test;
using ts::HostTensor;

namespace {

// Each case runs with each block that divides its channels; an odd number
// of output blocks runs the one-block register tiles.
const std::vector<ConvCase>& kCases = winograd_cases();

std::vector<ts::Layout> layouts_for(const ConvCase& c) {
  std::vector<ts::Layout> out;
  for (const ts::Layout l : {ts::Layout::Blocked8, ts::Layout::Blocked16})
    if (c.C % ts::layout_block(l) == 0 && c.O % ts::layout_block(l) == 0) out.push_back(l);
  return out;
}

std::string name(const ConvCase& c) { return case_name(c); }

// A sum of `terms` float products of values in [-1, 1]: Winograd's
// transforms add a few roundings of the sum's size to each.
double tolerance(double terms) { return 2e-6 * std::sqrt(terms) + 1e-5; }

}  // namespace

TEST(Winograd, ForwardMatchesDoubleReferenceAtEveryLevel) {
  std::mt19937 rng(11);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, c.C, 3, 3}, rng);
    HostTensor b = random_f32({c.O}, rng);
    Ref r{c, f32(x), f32(w), c.bias ? f32(b) : nullptr, nullptr};
    const double tol = tolerance(9.0 * c.C);
    for (const ts::Layout layout : layouts_for(c)) {
      const int64_t B = ts::layout_block(layout);
      ASSERT_TRUE(ts::winograd_suits(geom(c), layout));
      HostTensor xb = to_blocked(x, B);
      isatest::for_each_isa([&](ts::CpuIsa) {
        for (int threads : {1, 2})
          for (bool relu : {false, true}) {
            SCOPED_TRACE(std::string(ts::layout_name(layout)) + " threads " +
                         std::to_string(threads) + (relu ? " relu" : ""));
            auto k = ts::make_winograd_fwd(geom(c), layout, c.bias, relu, threads);
            HostTensor yb(ts::DType::F32, {c.N, c.O, c.OH(), c.OW()});
            ts::Tensor in[3] = {xb.view, w.view, c.bias ? b.view : ts::Tensor{}};
            k->run(in, &yb.view);
            HostTensor y = from_blocked(yb, B);
            for (int64_t i = 0; i < y.view.numel(); ++i) {
              const int64_t ow = i % c.OW(), oh = i / c.OW() % c.OH();
              const int64_t o = i / (c.OW() * c.OH()) % c.O, n = i / (c.OW() * c.OH() * c.O);
              double want = r.y(n, o, oh, ow);
              if (relu) want = std::max(want, 0.0);
              ASSERT_NEAR(f32(y)[i], want, tol * (1 + std::fabs(want))) << "y " << i;
            }
          }
      });
    }
  }
}

TEST(Winograd, InputGradientMatchesDoubleReferenceAtEveryLevel) {
  std::mt19937 rng(12);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);  // relu's input: about half <= 0
    HostTensor w = random_f32({c.O, c.C, 3, 3}, rng);
    HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    const double tol = tolerance(9.0 * c.O);
    for (const ts::Layout layout : layouts_for(c)) {
      const int64_t B = ts::layout_block(layout);
      HostTensor dyb = to_blocked(dy, B), xb = to_blocked(x, B);
      isatest::for_each_isa([&](ts::CpuIsa) {
        for (int threads : {1, 2})
          for (bool mask : {false, true}) {
            SCOPED_TRACE(std::string(ts::layout_name(layout)) + " threads " +
                         std::to_string(threads) + (mask ? " relu mask, over x" : ""));
            auto k = ts::make_winograd_bwd_data(geom(c), layout, mask, threads);
            // The masked form writes grad_input over x, as the runtime may.
            HostTensor xin(ts::DType::F32, xb.view.shape), fresh(ts::DType::F32, xb.view.shape);
            std::memcpy(xin.view.data, xb.view.data, xb.view.nbytes());
            HostTensor& gxb = mask ? xin : fresh;
            ts::Tensor in[3] = {dyb.view, xin.view, w.view};
            ts::Tensor out[3] = {gxb.view, ts::Tensor{}, ts::Tensor{}};
            k->run(in, out);
            HostTensor gx = from_blocked(gxb, B);
            for (int64_t i = 0; i < gx.view.numel(); ++i) {
              const int64_t iw = i % c.W, ih = i / c.W % c.H;
              const int64_t ch = i / (c.W * c.H) % c.C, n = i / (c.W * c.H * c.C);
              const double want = mask && f32(x)[i] <= 0.f ? 0.0 : r.gx(n, ch, ih, iw);
              ASSERT_NEAR(f32(gx)[i], want, tol * (1 + std::fabs(want))) << "grad_input " << i;
            }
          }
      });
    }
  }
}

// Sums over every output position of every sample (up to ~1000 terms
// here): the bound grows with their count, as for oneDNN's.
TEST(Winograd, WeightGradientMatchesDoubleReferenceAtEveryLevel) {
  std::mt19937 rng(15);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, c.C, 3, 3}, rng);
    HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    const double tol = tolerance(double(c.N) * c.OH() * c.OW());
    for (const ts::Layout layout : layouts_for(c)) {
      const int64_t B = ts::layout_block(layout);
      HostTensor dyb = to_blocked(dy, B), xb = to_blocked(x, B);
      isatest::for_each_isa([&](ts::CpuIsa) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(ts::layout_name(layout)) + " threads " +
                       std::to_string(threads));
          auto k = ts::make_winograd_bwd_weight(geom(c), layout, c.bias, threads);
          HostTensor gw(ts::DType::F32, w.view.shape), gb(ts::DType::F32, {c.O});
          ts::Tensor in[3] = {dyb.view, xb.view, w.view};
          ts::Tensor out[3] = {ts::Tensor{}, gw.view, c.bias ? gb.view : ts::Tensor{}};
          k->run(in, out);
          for (int64_t o = 0; o < c.O; ++o) {
            if (c.bias) {
              ASSERT_NEAR(f32(gb)[o], r.gb(o), tol * (1 + std::fabs(r.gb(o)))) << o;
            }
            for (int64_t ci = 0; ci < c.C; ++ci)
              for (int64_t t = 0; t < 9; ++t) {
                const double want = r.gw(o, ci, t / 3, t % 3);
                ASSERT_NEAR(f32(gw)[(o * c.C + ci) * 9 + t], want, tol * (1 + std::fabs(want)))
                    << "grad_weight " << o << "," << ci << "," << t;
              }
          }
        }
      });
    }
  }
}

TEST(Winograd, SuitsThreeByThreeStrideOneBlocked) {
  const ConvCase c = kCases[0];
  EXPECT_TRUE(ts::winograd_suits(geom(c), ts::Layout::Blocked8));
  EXPECT_FALSE(ts::winograd_suits(geom(c), ts::Layout::Plain));
  auto with = [&](auto change) {
    ts::ConvGeom g = geom(c);
    change(g);
    return ts::winograd_suits(g, ts::Layout::Blocked16);
  };
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.KH = g.KW = 5; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.sh = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.dw = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.G = 2; }));
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.C = 24; }));  // not whole blocks of 16
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.ph = 3; }));  // the input gradient's padding < 0
  EXPECT_FALSE(with([](ts::ConvGeom& g) { g.nd = 1; }));
  // Timed against oneDNN only with at least as many output tiles as channels.
  ts::ConvGeom g = geom(c);  // 2 x 5 x 5 tiles, 32 and 64 channels
  EXPECT_FALSE(ts::winograd_worth_timing(g));
  g.N = 3;
  EXPECT_TRUE(ts::winograd_worth_timing(g));
}

// A non-finite input stays non-finite in the outputs that read it (no
// relu: eager's relu maps -inf to 0). Which others, and NaN or inf, is not
// eager's: a tile's transforms mix its 16 inputs into all 4 outputs, and
// inf - inf is NaN (docs/ops.md says so).
TEST(Winograd, NonFiniteInputGivesNonFiniteOutputs) {
  const ConvCase c = kCases[1];
  std::mt19937 rng(13);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_f32({c.O, c.C, 3, 3}, rng);
  const int64_t at = ((1 * c.C + 3) * c.H + 4) * c.W + 2;  // n 1, channel 3, (4, 2)
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    x.view.as<float>()[at] = bad;
    HostTensor xb = to_blocked(x, 8);
    auto k = ts::make_winograd_fwd(geom(c), ts::Layout::Blocked8, false, false, 1);
    HostTensor yb(ts::DType::F32, {c.N, c.O, c.OH(), c.OW()});
    ts::Tensor in[3] = {xb.view, w.view, ts::Tensor{}};
    k->run(in, &yb.view);
    HostTensor y = from_blocked(yb, 8);
    for (int64_t o = 0; o < c.O; ++o)  // every output whose window holds it (padding 1)
      for (int64_t oh = 3; oh <= 5; ++oh)
        for (int64_t ow = 1; ow <= 3; ++ow)
          ASSERT_FALSE(std::isfinite(f32(y)[((1 * c.O + o) * c.OH() + oh) * c.OW() + ow]))
              << bad << " o " << o << " at " << oh << "," << ow;
  }
}

// The ops as the runtime builds them on blocked activations, each
// candidate forced and measured: forward, relu forward, backward and relu
// backward; with a bias and without.
TEST(Winograd, ConvOpsWithEachCandidate) {
  std::mt19937 rng(14);
  for (const ConvCase& c : {kCases[2], kCases[1]}) {
  SCOPED_TRACE(name(c));
  HostTensor a = random_f32({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_f32({c.O, c.C, 3, 3}, rng);
  HostTensor b = random_f32({c.O}, rng);
  HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
  HostTensor x = std::move(run_op("aten.relu.default", json::object(), {&a})[0]);
  Ref r{c, f32(x), f32(w), c.bias ? f32(b) : nullptr, f32(dy)};
  const double tol = 1e-4;
  // Runs the op, checking that a forced candidate is what every part ran.
  auto run = [](const char* op, const json& attrs, const std::vector<const HostTensor*>& in,
                const std::string& kernel) {
    OpHarness h(op, attrs, in);
    const auto picks = h.kernel().choices();
    EXPECT_FALSE(picks.empty()) << op;
    if (kernel == "measure") return h.run(in);
    for (const ts::KernelChoice* c : picks) {
      EXPECT_EQ(c->names[c->pick], kernel) << op << " " << c->key;
    }
    return h.run(in);
  };
  // "measure" times both on scratch tensors (one of them the absent bias).
  for (const char* kernel : {"onednn", "winograd", "measure"}) {
    EnvVar force("TRAINSTEP_KERNELS", kernel);
    EnvVar no_cache("TRAINSTEP_CACHE", "");
    ts::forget_kernel_choices();
    for (int64_t B : {8, 16}) {
      SCOPED_TRACE(std::string(kernel) + " block " + std::to_string(B));
      const std::string tag = B == 8 ? "nChw8c" : "nChw16c";
      HostTensor xb = to_blocked(x, B), dyb = to_blocked(dy, B);
      for (const char* op : {"aten.convolution.default", "trainstep.conv2d_relu"}) {
        SCOPED_TRACE(op);
        json attrs = c.attrs();
        attrs["in_layouts"] = {tag, "plain", "plain"};
        attrs["out_layouts"] = {tag};
        // No bias: an absent third input, as a traced program has it.
        HostTensor y = from_blocked(run(op, attrs, {&xb, &w, c.bias ? &b : nullptr}, kernel)[0], B);
        const bool relu = std::string(op) != "aten.convolution.default";
        for (int64_t i = 0; i < y.view.numel(); ++i) {
          const int64_t ow = i % c.OW(), oh = i / c.OW() % c.OH();
          const int64_t o = i / (c.OW() * c.OH()) % c.O, n = i / (c.OW() * c.OH() * c.O);
          const double want = relu ? std::max(r.y(n, o, oh, ow), 0.0) : r.y(n, o, oh, ow);
          ASSERT_NEAR(f32(y)[i], want, tol * (1 + std::fabs(want))) << "y " << i;
        }
      }
      for (const char* op : {"aten.convolution_backward.default", "trainstep.conv_backward_relu"}) {
        SCOPED_TRACE(op);
        json attrs = c.bwd_attrs(true, true, true);
        attrs["in_layouts"] = {tag, tag, "plain"};
        attrs["out_layouts"] = {tag, "plain", "plain"};
        HostTensor xin(ts::DType::F32, xb.view.shape);  // the relu form may overwrite it
        std::memcpy(xin.view.data, xb.view.data, xb.view.nbytes());
        auto g = run(op, attrs, {&dyb, &xin, &w}, kernel);
        const bool relu = std::string(op) != "aten.convolution_backward.default";
        HostTensor gx = from_blocked(g[0], B);
        for (int64_t i = 0; i < gx.view.numel(); ++i) {
          const int64_t iw = i % c.W, ih = i / c.W % c.H;
          const int64_t ch = i / (c.W * c.H) % c.C, n = i / (c.W * c.H * c.C);
          const double want = relu && f32(x)[i] <= 0.f ? 0.0 : r.gx(n, ch, ih, iw);
          ASSERT_NEAR(f32(gx)[i], want, tol * (1 + std::fabs(want))) << "grad_input " << i;
        }
        for (int64_t o = 0; o < c.O; ++o) {
          ASSERT_NEAR(f32(g[2])[o], r.gb(o), tol * (1 + std::fabs(r.gb(o)))) << "grad_bias";
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t k = 0; k < 9; ++k) {
              const double want = r.gw(o, ci, k / 3, k % 3);
              ASSERT_NEAR(f32(g[1])[(o * c.C + ci) * 9 + k], want, tol * (1 + std::fabs(want)))
                  << "grad_weight";
            }
        }
      }
    }
  }
}
}

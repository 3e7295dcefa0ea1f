// The depthwise weight gradient (src/ops/conv_depthwise.h) against the
// double-precision reference at every ISA level, with the input and
// grad_output each plain or channel-blocked, channel counts that are and
// are not a multiple of the block, and 1 and 2 threads (which must give the
// same bits); and the convolution backward op with it forced and with
// oneDNN (TRAINSTEP_KERNELS), so both paths run on any machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "conv_ref.h"
#include "isa_levels.h"
#include "op_test_util.h"
#include "ops/conv_depthwise.h"
#include "test_util.h"

using namespace ts_test;
using ts::HostTensor;
using ts::Layout;

namespace {

// (N, C, H, W, O = C, KH, KW, sh, sw, ph, pw, dh, dw, G = C, bias).
const std::vector<ConvCase> kCases = {
    {2, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, true},
    {3, 40, 8, 8, 40, 7, 7, 1, 1, 3, 3, 1, 1, 40, true},     // ConvNeXt's: 49 taps, C % 16 = 8
    {2, 24, 11, 10, 24, 5, 5, 2, 2, 2, 2, 1, 1, 24, false},  // stride 2, odd sizes
    {2, 32, 9, 9, 32, 3, 2, 1, 2, 2, 1, 2, 1, 32, true},     // dilation, uneven padding
    {4, 48, 2, 2, 48, 5, 5, 1, 1, 2, 2, 1, 1, 48, true}};    // a 2x2 image, 5x5 kernel

std::string name(const ConvCase& c) {
  return "N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " H" + std::to_string(c.H) +
         " W" + std::to_string(c.W) + " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) +
         " s" + std::to_string(c.sh) + "," + std::to_string(c.sw) + " p" + std::to_string(c.ph) +
         "," + std::to_string(c.pw) + " d" + std::to_string(c.dh) + "," + std::to_string(c.dw);
}

// The layouts a case can take: plain, and blocked where C is a multiple.
std::vector<Layout> layouts(const ConvCase& c) {
  std::vector<Layout> l = {Layout::Plain};
  if (c.C % 8 == 0) l.push_back(Layout::Blocked8);
  if (c.C % 16 == 0) l.push_back(Layout::Blocked16);
  return l;
}

HostTensor in_layout(const HostTensor& t, Layout l) {
  if (l == Layout::Plain) {
    HostTensor c(t.view.dtype, t.view.shape);
    std::memcpy(c.view.data, t.view.data, t.view.nbytes());
    return c;
  }
  return to_blocked(t, ts::layout_block(l));
}

}  // namespace

TEST(DepthwiseWgrad, MatchesDoubleReferenceAtEveryLevelAndLayout) {
  std::mt19937 rng(42);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    ASSERT_TRUE(ts::depthwise_suits(geom(c)));
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
    HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    for (Layout lx : layouts(c))
      for (Layout ldy : layouts(c)) {
        SCOPED_TRACE(std::string("x ") + ts::layout_name(lx) + ", dy " + ts::layout_name(ldy));
        HostTensor xl = in_layout(x, lx), dyl = in_layout(dy, ldy);
        isatest::for_each_isa([&](ts::CpuIsa) {
          std::vector<std::vector<float>> by_threads;
          for (int threads : {1, 2}) {
            auto k = ts::make_depthwise_wgrad(geom(c), lx, ldy, c.bias, threads);
            HostTensor gw(ts::DType::F32, {c.O, 1, c.KH, c.KW}), gb(ts::DType::F32, {c.O});
            ts::Tensor in[3] = {dyl.view, xl.view, w.view};
            ts::Tensor out[3] = {ts::Tensor{}, gw.view, c.bias ? gb.view : ts::Tensor{}};
            k->run(in, out);
            k->run(in, out);  // a second run sums afresh
            expect_conv_weight_grads(c, r, f32(gw), c.bias ? f32(gb) : nullptr);
            by_threads.emplace_back(f32(gw), f32(gw) + gw.view.numel());
          }
          EXPECT_EQ(by_threads[0], by_threads[1]) << "1 and 2 threads differ";
        });
      }
  }
  // Not depthwise: groups of several channels, or a channel multiplier.
  ConvCase c = kCases[0];
  c.G = 8;
  EXPECT_FALSE(ts::depthwise_suits(geom(c)));
  c.G = 16;
  c.O = 32;
  EXPECT_FALSE(ts::depthwise_suits(geom(c)));
  c.O = 16;
  c.G = 1;
  EXPECT_FALSE(ts::depthwise_suits(geom(c)));
}

// The op as the runtime builds it, each candidate forced: every gradient
// checked, the input's too (oneDNN's part either way).
TEST(DepthwiseWgrad, ConvBackwardOpWithEachCandidate) {
  std::mt19937 rng(7);
  for (const char* kernel : {"onednn", "depthwise"}) {
    EnvVar force("TRAINSTEP_KERNELS", kernel);
    for (const ConvCase& c : {kCases[1], kCases[2]}) {
      SCOPED_TRACE(std::string(kernel) + " " + name(c));
      HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
      HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
      HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
      Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
      auto g = run_op("aten.convolution_backward.default", c.bwd_attrs(true, true, c.bias), {&dy, &x, &w});
      expect_conv_weight_grads(c, r, f32(g[1]), c.bias ? f32(g[2]) : nullptr);
      for (int64_t i = 0; i < x.view.numel(); ++i) {
        const int64_t iw = i % c.W, ih = i / c.W % c.H, ch = i / (c.W * c.H) % c.C, n = i / (c.W * c.H * c.C);
        const double want = r.gx(n, ch, ih, iw);
        ASSERT_NEAR(f32(g[0])[i], want, 1e-4 * (1 + std::fabs(want))) << "grad_input " << i;
      }
    }
  }
}

TEST(DepthwiseFwd, MatchesDoubleReferenceAtEveryLevelAndLayout) {
  std::mt19937 rng(43);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
    HostTensor b = random_f32({c.O}, rng);
    Ref r{c, f32(x), f32(w), c.bias ? f32(b) : nullptr, nullptr};
    for (Layout lx : layouts(c))
      for (Layout ly : layouts(c)) {
        SCOPED_TRACE(std::string("x ") + ts::layout_name(lx) + ", y " + ts::layout_name(ly));
        HostTensor xl = in_layout(x, lx);
        isatest::for_each_isa([&](ts::CpuIsa) {
          std::vector<std::vector<float>> by_threads;
          for (int threads : {1, 2}) {
            auto k = ts::make_depthwise_fwd(geom(c), lx, ly, c.bias, threads);
            HostTensor y(ts::DType::F32, {c.N, c.O, c.OH(), c.OW()});
            ts::Tensor in[3] = {xl.view, w.view, c.bias ? b.view : ts::Tensor{}};
            k->run(in, &y.view);
            HostTensor yp = ly == Layout::Plain ? std::move(y) : from_blocked(y, ts::layout_block(ly));
            for (int64_t i = 0; i < yp.view.numel(); ++i) {
              const int64_t ow = i % c.OW(), oh = i / c.OW() % c.OH(), o = i / (c.OW() * c.OH()) % c.O,
                            n = i / (c.OW() * c.OH() * c.O);
              const double want = r.y(n, o, oh, ow);
              ASSERT_NEAR(f32(yp)[i], want, 1e-5 * (1 + std::fabs(want))) << "output " << i;
            }
            by_threads.emplace_back(f32(yp), f32(yp) + yp.view.numel());
          }
          EXPECT_EQ(by_threads[0], by_threads[1]) << "1 and 2 threads differ";
        });
      }
  }
}

TEST(DepthwiseFwd, ConvolutionOpWithEachCandidate) {
  std::mt19937 rng(8);
  for (const char* kernel : {"onednn", "depthwise"}) {
    EnvVar force("TRAINSTEP_KERNELS", kernel);
    for (const ConvCase& c : {kCases[1], kCases[4]}) {
      SCOPED_TRACE(std::string(kernel) + " " + name(c));
      HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
      HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
      HostTensor b = random_f32({c.O}, rng);
      Ref r{c, f32(x), f32(w), f32(b), nullptr};
      auto y = run_op("aten.convolution.default", c.attrs(), {&x, &w, &b});
      for (int64_t i = 0; i < y[0].view.numel(); ++i) {
        const int64_t ow = i % c.OW(), oh = i / c.OW() % c.OH(), o = i / (c.OW() * c.OH()) % c.O,
                      n = i / (c.OW() * c.OH() * c.O);
        const double want = r.y(n, o, oh, ow);
        ASSERT_NEAR(f32(y[0])[i], want, 1e-5 * (1 + std::fabs(want))) << "output " << i;
      }
    }
  }
}

// The one-channel weight gradient (src/ops/conv_wgrad_c1.h) against the
// double-precision reference at every ISA level, for both channel blocks and
// thread counts; and the convolution backward ops with it forced and with
// oneDNN (TRAINSTEP_KERNELS), so both paths run on any machine: gradients of
// input, weight and bias, the relu-masked form too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "conv_ref.h"
#include "isa_levels.h"
#include "op_test_util.h"
#include "ops/conv_wgrad_c1.h"
#include "test_util.h"

using namespace ts_test;
using ts::HostTensor;

namespace {

// (N, C=1, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G=1, bias); O a
// multiple of 16, so each case runs with both blocks.
const std::vector<ConvCase> kCases = {
    {3, 1, 9, 9, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},
    {2, 1, 11, 8, 32, 3, 3, 2, 1, 1, 2, 1, 1, 1, false},    // stride, uneven padding
    {2, 1, 12, 12, 16, 5, 5, 1, 1, 2, 2, 1, 1, 1, true},    // 25 taps: passes of 9, 9, 7
    {2, 1, 13, 13, 16, 3, 2, 1, 2, 0, 1, 2, 1, 1, true},    // dilation, 6 taps
    {1, 1, 4, 4, 16, 4, 4, 1, 1, 0, 0, 1, 1, 1, true},      // output 1x1
    {64, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1, true}};  // the MNIST CNN's conv1

std::string name(const ConvCase& c) {
  return "N" + std::to_string(c.N) + " H" + std::to_string(c.H) + " W" + std::to_string(c.W) +
         " O" + std::to_string(c.O) + " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) +
         " s" + std::to_string(c.sh) + "," + std::to_string(c.sw) + " p" + std::to_string(c.ph) +
         "," + std::to_string(c.pw) + " d" + std::to_string(c.dh) + "," + std::to_string(c.dw);
}

}  // namespace

TEST(OneChannelWgrad, MatchesDoubleReferenceAtEveryLevel) {
  std::mt19937 rng(42);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(name(c));
    HostTensor x = random_f32({c.N, 1, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
    HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
    Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
    for (const ts::Layout layout : {ts::Layout::Blocked8, ts::Layout::Blocked16}) {
      ASSERT_TRUE(ts::one_channel_wgrad_suits(geom(c), layout));
      HostTensor dyb = to_blocked(dy, ts::layout_block(layout));
      isatest::for_each_isa([&](ts::CpuIsa) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(ts::layout_name(layout)) + " threads " + std::to_string(threads));
          auto k = ts::make_one_channel_wgrad(geom(c), layout, c.bias, threads);
          HostTensor gw(ts::DType::F32, {c.O, 1, c.KH, c.KW}), gb(ts::DType::F32, {c.O});
          ts::Tensor in[3] = {dyb.view, x.view, w.view};
          ts::Tensor out[3] = {ts::Tensor{}, gw.view, c.bias ? gb.view : ts::Tensor{}};
          k->run(in, out);
          expect_conv_weight_grads(c, r, f32(gw), c.bias ? f32(gb) : nullptr);
        }
      });
    }
  }
  // Plain grad_output, several input channels, or groups: not this kernel's.
  ConvCase c = kCases[0];
  EXPECT_FALSE(ts::one_channel_wgrad_suits(geom(c), ts::Layout::Plain));
  c.C = c.G = 2;
  EXPECT_FALSE(ts::one_channel_wgrad_suits(geom(c), ts::Layout::Blocked8));
  c.G = 1;
  EXPECT_FALSE(ts::one_channel_wgrad_suits(geom(c), ts::Layout::Blocked8));
}

// The ops as the runtime builds them, with grad_output blocked as
// plan_layouts leaves it: each candidate forced, every gradient checked.
// The relu-masked form may write grad_input over x, so the weight gradient
// must have read x first.
TEST(OneChannelWgrad, ConvBackwardOpsWithEachCandidate) {
  std::mt19937 rng(7);
  for (const char* kernel : {"onednn", "one_channel"}) {
    EnvVar force("TRAINSTEP_KERNELS", kernel);
    for (const ConvCase& c : {kCases[1], kCases[2]}) {
      SCOPED_TRACE(std::string(kernel) + " " + name(c));
      HostTensor a = random_f32({c.N, 1, c.H, c.W}, rng);
      HostTensor w = random_f32({c.O, 1, c.KH, c.KW}, rng);
      HostTensor dy = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
      HostTensor x = std::move(run_op("aten.relu.default", json::object(), {&a})[0]);
      Ref r{c, f32(x), f32(w), nullptr, f32(dy)};
      for (const char* blocked : {"nChw8c", "nChw16c"}) {
        SCOPED_TRACE(blocked);
        HostTensor dyb = to_blocked(dy, std::string(blocked) == "nChw8c" ? 8 : 16);
        json attrs = c.bwd_attrs(true, true, c.bias);
        attrs["in_layouts"] = {blocked, "plain", "plain"};
        for (const char* op : {"aten.convolution_backward.default", "trainstep.conv_backward_relu"}) {
          SCOPED_TRACE(op);
          HostTensor xin(ts::DType::F32, x.view.shape);  // the relu form may overwrite it
          std::memcpy(xin.view.data, x.view.data, x.view.nbytes());
          auto g = run_op(op, attrs, {&dyb, &xin, &w});
          expect_conv_weight_grads(c, r, f32(g[1]), c.bias ? f32(g[2]) : nullptr);
          const bool relu = std::string(op) != "aten.convolution_backward.default";
          for (int64_t i = 0; i < x.view.numel(); ++i) {
            const int64_t iw = i % c.W, ih = i / c.W % c.H, n = i / (c.W * c.H);
            const double want = relu && f32(x)[i] <= 0.f ? 0.0 : r.gx(n, 0, ih, iw);
            ASSERT_NEAR(f32(g[0])[i], want, 1e-4 * (1 + std::fabs(want))) << "grad_input " << i;
          }
        }
      }
    }
  }
}

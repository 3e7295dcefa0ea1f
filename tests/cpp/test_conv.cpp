// aten.convolution / aten.convolution_backward against naive double-precision
// references, error messages, repeatability and the real model's sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <limits>

#include "conv_ref.h"
#include "op_test_util.h"

using namespace ts_test;
using ts::DType;
using ts::HostTensor;

namespace {

// Compares every element, or `samples` random ones, of a 4-D result.
template <class F>
void check4(const HostTensor& t, F ref, std::mt19937& rng, int samples = 0) {
  const auto& s = t.view.shape;
  int64_t n = t.view.numel();
  auto at = [&](int64_t i) {
    int64_t d = i % s[3], c = (i / s[3]) % s[2], b = (i / s[3] / s[2]) % s[1], a = i / s[3] / s[2] / s[1];
    double want = ref(a, b, c, d);
    float got = f32(t)[i];
    ASSERT_NEAR(got, want, 1e-4 + 1e-4 * std::fabs(want)) << "index " << i << " of " << ts::shape_str(s);
  };
  if (samples == 0) {
    for (int64_t i = 0; i < n; ++i) at(i);
  } else {
    std::uniform_int_distribution<int64_t> d(0, n - 1);
    for (int k = 0; k < samples; ++k) at(d(rng));
  }
}

void check_case(const ConvCase& c, uint32_t seed, int samples = 0) {
  SCOPED_TRACE("N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " H" + std::to_string(c.H) +
               " W" + std::to_string(c.W) + " O" + std::to_string(c.O) + " k" + std::to_string(c.KH) +
               "x" + std::to_string(c.KW) + " s" + std::to_string(c.sh) + "," + std::to_string(c.sw) +
               " p" + std::to_string(c.ph) + "," + std::to_string(c.pw) + " d" + std::to_string(c.dh) +
               "," + std::to_string(c.dw) + " g" + std::to_string(c.G));
  std::mt19937 rng(seed);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_f32({c.O, c.C / c.G, c.KH, c.KW}, rng);
  HostTensor b = random_f32({c.O}, rng);
  HostTensor go = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
  Ref r{c, f32(x), f32(w), c.bias ? f32(b) : nullptr, f32(go)};

  std::vector<ts::TensorType> types;
  auto y = run_op("aten.convolution.default", c.attrs(), {&x, &w, c.bias ? &b : nullptr}, &types);
  ASSERT_EQ(types[0].shape, (ts::Shape{c.N, c.O, c.OH(), c.OW()}));
  check4(y[0], [&](auto a, auto bb, auto cc, auto d) { return r.y(a, bb, cc, d); }, rng, samples);

  auto g = run_op("aten.convolution_backward.default", c.bwd_attrs(true, true, c.bias), {&go, &x, &w},
                  &types, {false, false, !c.bias});
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[2].shape, (ts::Shape{c.O}));
  check4(g[0], [&](auto a, auto bb, auto cc, auto d) { return r.gx(a, bb, cc, d); }, rng, samples);
  check4(g[1], [&](auto a, auto bb, auto cc, auto d) { return r.gw(a, bb, cc, d); }, rng, samples);
  if (c.bias) {
    for (int64_t o = 0; o < c.O; ++o) ASSERT_NEAR(f32(g[2])[o], r.gb(o), 1e-3 + 1e-4 * std::fabs(r.gb(o)));
  }
}

}  // namespace

TEST(Conv, FixedCases) {
  std::vector<ConvCase> cases = {
      {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1, false},
      {2, 3, 7, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},      // odd sizes, stride 2, padding
      {2, 4, 11, 10, 6, 3, 2, 2, 1, 1, 0, 2, 1, 2, true},    // groups, dilation, mixed
      {3, 6, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, false},     // depthwise
      {1, 5, 6, 7, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},      // 1x1
      {2, 2, 9, 9, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, true},      // stride 3, dilation 2
  };
  uint32_t seed = 1;
  for (const auto& c : cases) check_case(c, seed++);
}

TEST(Conv, RandomCases) {
  std::mt19937 rng(1234);
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int t = 0; t < 25; ++t) {
    ConvCase c;
    c.G = r(1, 3);
    c.N = r(1, 3), c.C = c.G * r(1, 3), c.O = c.G * r(1, 3);
    c.KH = r(1, 4), c.KW = r(1, 4), c.sh = r(1, 3), c.sw = r(1, 3);
    c.dh = r(1, 2), c.dw = r(1, 2), c.ph = r(0, 2), c.pw = r(0, 2);
    c.H = c.dh * (c.KH - 1) + r(1, 9), c.W = c.dw * (c.KW - 1) + r(1, 9);
    c.bias = r(0, 1);
    check_case(c, 100 + t);
  }
}

TEST(Conv, AttrsOfLengthOne) {
  std::mt19937 rng(7);
  HostTensor x = random_f32({1, 2, 6, 6}, rng), w = random_f32({3, 2, 3, 3}, rng);
  json a = {{"stride", {2}}, {"padding", {1}}, {"dilation", {1}}, {"transposed", false},
            {"output_padding", {0}}, {"groups", 1}};
  std::vector<ts::TensorType> types;
  run_op("aten.convolution.default", a, {&x, &w, nullptr}, &types);
  EXPECT_EQ(types[0].shape, (ts::Shape{1, 3, 3, 3}));
}

TEST(Conv, RealModelSizes) {
  // Sampled: a full naive reference would be slow.
  check_case({64, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1, true}, 11, 300);
  check_case({64, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, true}, 12, 300);
}

TEST(Conv, BackwardOutputMaskAndSkips) {
  ConvCase c{2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true};
  std::mt19937 rng(5);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng), w = random_f32({c.O, 2, 3, 3}, rng);
  HostTensor go = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
  Ref r{c, f32(x), f32(w), nullptr, f32(go)};
  const std::string op = "aten.convolution_backward.default";
  // Only grad_bias read: grad_weight is computed into a spare buffer.
  auto g = run_op(op, c.bwd_attrs(false, true, true), {&go, &x, &w}, nullptr, {true, true, false});
  for (int64_t o = 0; o < c.O; ++o) EXPECT_NEAR(f32(g[2])[o], r.gb(o), 1e-3);
  // Only grad_input.
  g = run_op(op, c.bwd_attrs(true, false, false), {&go, &x, &w}, nullptr, {false, true, true});
  check4(g[0], [&](auto a, auto b, auto cc, auto d) { return r.gx(a, b, cc, d); }, rng);
  // Only grad_weight.
  g = run_op(op, c.bwd_attrs(false, true, false), {&go, &x, &w}, nullptr, {true, false, true});
  check4(g[1], [&](auto a, auto b, auto cc, auto d) { return r.gw(a, b, cc, d); }, rng);
}

TEST(Conv, RunTwiceIsIdentical) {
  ConvCase c{2, 4, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, true};
  std::mt19937 rng(9);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng), w = random_f32({c.O, c.C, 3, 3}, rng);
  HostTensor b = random_f32({c.O}, rng), go = random_f32({c.N, c.O, c.OH(), c.OW()}, rng);
  OpHarness f("aten.convolution.default", c.attrs(), {&x, &w, &b});
  auto y1 = f.run({&x, &w, &b}), y2 = f.run({&x, &w, &b});
  EXPECT_EQ(0, std::memcmp(f32(y1[0]), f32(y2[0]), y1[0].view.nbytes()));
  OpHarness bw("aten.convolution_backward.default", c.bwd_attrs(true, true, true), {&go, &x, &w});
  auto g1 = bw.run({&go, &x, &w}), g2 = bw.run({&go, &x, &w});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(0, std::memcmp(f32(g1[i]), f32(g2[i]), g1[i].view.nbytes())) << "output " << i;
}

TEST(Conv, Errors) {
  const std::string op = "aten.convolution.default";
  auto T = [](ts::Shape s, DType d = DType::F32) { return ts::TensorType{d, s}; };
  json a = {{"stride", {1, 1}}, {"padding", {0, 0}}, {"dilation", {1, 1}}, {"transposed", false},
            {"output_padding", {0, 0}}, {"groups", 1}};
  std::vector<bool> nob = {true, true, false};
  EXPECT_EQ(infer_error(op, a, {T({1, 3, 8, 8}), T({4, 2, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): input has 3 channels but weight "
            "float32[4, 2, 3, 3] with groups=1 expects 2");
  json t = a;
  t["transposed"] = true;
  t["output_padding"] = {1, 1};
  EXPECT_EQ(infer_error(op, t, {T({1, 4, 8, 8}), T({4, 3, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): output_padding must be smaller than stride or "
            "dilation, got output_padding 1x1 with stride 1x1 and dilation 1x1");
  json g = a;
  g["groups"] = 2;
  EXPECT_EQ(infer_error(op, g, {T({1, 4, 8, 8}), T({3, 2, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): weight out channels (3) must be divisible by "
            "groups (2)");
  EXPECT_EQ(infer_error(op, a, {T({1, 3, 2, 8}), T({4, 3, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): output size is not positive: input "
            "float32[1, 3, 2, 8], weight float32[4, 3, 3, 3], padding 0x0, dilation 1x1 give "
            "output 0x6");
  EXPECT_EQ(infer_error(op, a, {T({3, 8, 8}), T({4, 3, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): weight must be rank 3 (O, C/groups, kL) for "
            "input float32[3, 8, 8], got float32[4, 3, 3, 3]");
  EXPECT_EQ(infer_error(op, a, {T({1, 3, 8, 8}, DType::F64), T({4, 3, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): input and weight must both be float32, both "
            "float64 or both bfloat16, got input float64[1, 3, 8, 8] and weight float32[4, 3, 3, 3]");
  EXPECT_EQ(infer_error(op, a, {T({1, 3, 8, 8}), T({4, 3, 3, 3}), T({5})}),
            "node 'n0' (aten.convolution.default): bias must be float32[4], got float32[5]");
  json s = a;
  s["stride"] = {1, 1, 1};
  EXPECT_EQ(infer_error(op, s, {T({1, 3, 8, 8}), T({4, 3, 3, 3}), {}}, nob),
            "node 'n0' (aten.convolution.default): attribute 'stride' must have 1 or 2 values, got 3");
  json ba = a;
  ba["bias_sizes"] = nullptr;
  ba["output_mask"] = {true, true, false};
  EXPECT_EQ(infer_error("aten.convolution_backward.default", ba,
                        {T({1, 4, 5, 5}), T({1, 3, 8, 8}), T({4, 3, 3, 3})}),
            "node 'n0' (aten.convolution_backward.default): grad_output must be "
            "float32[1, 4, 6, 6], got float32[1, 4, 5, 5]");
}

TEST(Conv, Conv2dReluMatchesConvThenRelu) {
  std::vector<ConvCase> cases = {
      {2, 3, 7, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},
      {2, 4, 11, 10, 6, 3, 2, 2, 1, 1, 0, 2, 1, 2, false},
      {64, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},   // the model's conv1
      {8, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},   // conv2, smaller batch
  };
  std::mt19937 rng(21);
  for (const auto& c : cases) {
    HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_f32({c.O, c.C / c.G, c.KH, c.KW}, rng);
    HostTensor b = random_f32({c.O}, rng);
    const HostTensor* bp = c.bias ? &b : nullptr;
    std::vector<ts::TensorType> ft;
    auto y = run_op("aten.convolution.default", c.attrs(), {&x, &w, bp});
    auto r = run_op("aten.relu.default", json::object(), {&y[0]});
    auto fz = run_op("trainstep.conv2d_relu", c.attrs(), {&x, &w, bp}, &ft);
    ASSERT_EQ(ft[0], y[0].view.type());
    std::vector<float> want(f32(r[0]), f32(r[0]) + r[0].view.numel());
    EXPECT_TRUE(all_close(fz[0], want, 1e-5f, 1e-5f));
    int64_t zeros = 0;
    for (float v : want) zeros += v == 0.f;
    EXPECT_GT(zeros, 0);  // relu did clip something
  }
  // NaN propagates as in aten.relu (oneDNN's post-op alone would give 0),
  // and inputs that are non-finite or near overflow give relu(conv) too.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  ConvCase c0{2, 16, 6, 6, 16, 3, 3, 1, 1, 0, 0, 1, 1, 1, true};
  for (int k = 0; k < 4; ++k) {
    HostTensor x = random_f32({c0.N, c0.C, c0.H, c0.W}, rng), w = random_f32({c0.O, c0.C, 3, 3}, rng);
    HostTensor b = random_f32({c0.O}, rng);
    float* px = x.view.as<float>();
    float* pw = w.view.as<float>();
    if (k == 0) px[7] = nan;
    if (k == 1 || k == 3) {  // k=1: inf - inf in every channel's first output
      px[0] = px[1] = k == 1 ? 1.f : 3e38f;  // k=3: finite, but products overflow
      for (int64_t o = 0; o < c0.O; ++o) {
        pw[o * c0.C * 9] = k == 1 ? inf : 2.f;
        pw[o * c0.C * 9 + 1] = k == 1 ? -inf : -2.f;
      }
    }
    if (k == 2) b.view.as<float>()[2] = -inf;  // relu(-inf) = 0
    auto y = run_op("aten.convolution.default", c0.attrs(), {&x, &w, &b});
    auto r = run_op("aten.relu.default", json::object(), {&y[0]});
    auto fz = run_op("trainstep.conv2d_relu", c0.attrs(), {&x, &w, &b});
    int64_t nans = 0, bad = 0;
    for (int64_t i = 0; i < r[0].view.numel(); ++i) {
      float want = f32(r[0])[i], got = f32(fz[0])[i];
      nans += std::isnan(want);
      bool same = std::isnan(want) ? std::isnan(got)
                                   : got == want || std::fabs(got - want) <= 1e-5f + 1e-5f * std::fabs(want);
      bad += !same;
    }
    if (k < 2) {
      EXPECT_GT(nans, 0) << "case " << k;
    }
    EXPECT_EQ(bad, 0) << "case " << k;
  }
  // Same validation as the convolution.
  auto T = [](ts::Shape s) { return ts::TensorType{DType::F32, s}; };
  ConvCase c{1, 3, 8, 8, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, false};
  EXPECT_EQ(infer_error("trainstep.conv2d_relu", c.attrs(), {T({1, 3, 8, 8}), T({4, 2, 3, 3}), {}},
                        {true, true, false}),
            "node 'n0' (trainstep.conv2d_relu): input has 3 channels but weight "
            "float32[4, 2, 3, 3] with groups=1 expects 2");
}

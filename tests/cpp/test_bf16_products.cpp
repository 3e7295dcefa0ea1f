// bfloat16 matrix products and convolutions on oneDNN's bf16 primitives
// (Bf16::Native) against the same op's float32 kernel run on the same
// (bf16-exact) inputs and rounded once (make_kernel's ViaFloat32 form):
// torch computes both in float32 and rounds once, so they may differ only
// by accumulation order, i.e. by at most one bf16 ulp per element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "ops/kernel_choice.h"
#include "bf16_test_util.h"
#include "ops/op.h"
#include "trainstep/bfloat16.h"

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

namespace {

using bf16_test::Bf16Node;
using bf16_test::bf16_ulp;
using bf16_test::random_bf16;

// Each element within one bf16 ulp of its own magnitude, plus a sliver of
// the output's scale for near-zero sums, whose float32 rounding noise
// (accumulation order) is large against their own ulp.
::testing::AssertionResult within_one_ulp(const HostTensor& got, const HostTensor& want) {
  const int64_t n = want.view.numel();
  if (got.view.dtype != DType::BF16 || want.view.dtype != DType::BF16 || got.view.numel() != n)
    return ::testing::AssertionFailure() << "types " << got.view.type().str() << " and "
                                         << want.view.type().str();
  const uint16_t* g = got.view.as<uint16_t>();
  const uint16_t* w = want.view.as<uint16_t>();
  float scale = 0.f;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(ts::bf16_to_float(w[i])));
  for (int64_t i = 0; i < n; ++i) {
    const float a = ts::bf16_to_float(g[i]), b = ts::bf16_to_float(w[i]);
    const float tol = bf16_ulp(std::max(std::fabs(a), std::fabs(b))) + scale * 0x1p-14f;
    if (!(std::fabs(a - b) <= tol))
      return ::testing::AssertionFailure() << "at " << i << " of " << want.view.type().str()
                                           << ": got " << a << ", want " << b << " (scale "
                                           << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// Runs the node both ways and compares the outputs that are read.
void expect_matches(const std::string& op, const json& attrs,
                    const std::vector<const HostTensor*>& in, const std::vector<bool>& skip = {}) {
  Bf16Node n(op, attrs, in);
  std::vector<HostTensor> got = n.run(*n.native, in, skip);
  std::vector<HostTensor> want = n.run(*n.via_f32, in, skip);
  for (size_t j = 0; j < got.size(); ++j) {
    if (j < skip.size() && skip[j]) continue;
    EXPECT_TRUE(within_one_ulp(got[j], want[j])) << op << " output " << j << " " << attrs.dump();
  }
}

std::string str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

// Whether oneDNN runs bf16 on hardware here (AVX512_BF16 or AMX).
bool cpu_has_bf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

}  // namespace

// ---- matrix products ----

TEST(Bf16Products, Mm) {
  std::mt19937 rng(11);
  const std::vector<std::vector<int64_t>> sizes = {
      {1, 1, 1}, {7, 13, 5}, {64, 1031, 48}, {33, 2048, 17}, {128, 64, 256}, {3, 4099, 2}};
  for (const auto& s : sizes) {
    SCOPED_TRACE(str(s));
    HostTensor a = random_bf16({s[0], s[1]}, rng), b = random_bf16({s[1], s[2]}, rng);
    expect_matches("aten.mm.default", json::object(), {&a, &b});
  }
}

TEST(Bf16Products, Bmm) {
  std::mt19937 rng(12);
  const std::vector<std::vector<int64_t>> sizes = {{3, 9, 1100, 7}, {4, 16, 32, 24}, {1, 1, 1, 1}};
  for (const auto& s : sizes) {
    SCOPED_TRACE(str(s));
    HostTensor a = random_bf16({s[0], s[1], s[2]}, rng), b = random_bf16({s[0], s[2], s[3]}, rng);
    expect_matches("aten.bmm.default", json::object(), {&a, &b});
  }
}

TEST(Bf16Products, Addmm) {
  std::mt19937 rng(13);
  const int64_t M = 24, K = 1500, N = 40;
  HostTensor a = random_bf16({M, K}, rng), b = random_bf16({K, N}, rng);
  const std::vector<Shape> self_shapes = {{N}, {M, N}, {1, N}, {M, 1}, {}};
  const std::vector<std::pair<double, double>> beta_alpha = {{1, 1}, {0.5, 2}, {0, 1}, {-1, 0.25}};
  for (const Shape& ss : self_shapes)
    for (auto [beta, alpha] : beta_alpha) {
      SCOPED_TRACE(ts::shape_str(ss) + " beta " + std::to_string(beta) + " alpha " +
                   std::to_string(alpha));
      HostTensor s = random_bf16(ss, rng);
      expect_matches("aten.addmm.default", {{"beta", beta}, {"alpha", alpha}}, {&s, &a, &b});
    }
}

// An empty inner dimension: the product is zeros, the result beta * self.
TEST(Bf16Products, EmptyInnerDimension) {
  std::mt19937 rng(14);
  HostTensor a = random_bf16({3, 0}, rng), b = random_bf16({0, 4}, rng), s = random_bf16({4}, rng);
  expect_matches("aten.mm.default", json::object(), {&a, &b});
  expect_matches("aten.addmm.default", {{"beta", 0.5}, {"alpha", 1}}, {&s, &a, &b});
}

TEST(Bf16Products, TransposedOperands) {
  std::mt19937 rng(15);
  const std::vector<std::vector<int64_t>> sizes = {{5, 7, 3}, {32, 1200, 48}, {2, 3, 1030, 9}};
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      SCOPED_TRACE(str(s) + " trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb));
      const bool batched = s.size() == 4;
      const int64_t B = batched ? s[0] : 1, M = s[s.size() - 3], K = s[s.size() - 2],
                    N = s[s.size() - 1];
      Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
      if (batched) {
        as.insert(as.begin(), B);
        bs.insert(bs.begin(), B);
      }
      HostTensor a = random_bf16(as, rng), b = random_bf16(bs, rng);
      expect_matches("trainstep.matmul", {{"trans_a", ta}, {"trans_b", tb}}, {&a, &b});
    }
}

// The oneDNN implementation is reported as the kernel's choice, so bench
// --profile shows it; on a CPU with bf16 instructions it is a bf16 one.
TEST(Bf16Products, ReportsOneDnnImplementation) {
  std::mt19937 rng(16);
  HostTensor a = random_bf16({64, 256}, rng), b = random_bf16({256, 128}, rng);
  Bf16Node n("aten.mm.default", json::object(), {&a, &b});
  const auto choices = n.native->choices();
  ASSERT_EQ(choices.size(), 1u);
  const ts::KernelChoice& c = *choices[0];
  EXPECT_EQ(c.key, "gemm bf16 m=64 n=128 k=256");
  EXPECT_EQ(c.from, ts::KernelChoice::From::Only);
  const std::string impl = c.describe();
  RecordProperty("impl", impl);
  EXPECT_EQ(impl.rfind("onednn ", 0), 0u) << impl;
  EXPECT_NE(impl.find("(the only candidate)"), std::string::npos) << impl;
  if (cpu_has_bf16()) {
    EXPECT_TRUE(impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos)
        << impl;
  }
  EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
}

// ---- convolutions ----

namespace {

struct Conv {
  int64_t N, C, H, W, O, KH, KW;
  int64_t s = 1, p = 0, d = 1, G = 1;
  bool bias = true;
  int64_t out(int64_t size, int64_t k) const { return (size + 2 * p - d * (k - 1) - 1) / s + 1; }
  json attrs() const {
    return {{"stride", {s, s}},     {"padding", {p, p}}, {"dilation", {d, d}},
            {"transposed", false}, {"output_padding", {0, 0}}, {"groups", G}};
  }
  json bwd_attrs(std::vector<bool> mask) const {
    json a = attrs();
    a["bias_sizes"] = bias ? json::array({O}) : json(nullptr);
    a["output_mask"] = mask;
    return a;
  }
  std::string str() const {
    return "N" + std::to_string(N) + " C" + std::to_string(C) + " " + std::to_string(H) + "x" +
           std::to_string(W) + " O" + std::to_string(O) + " k" + std::to_string(KH) + "x" +
           std::to_string(KW) + " s" + std::to_string(s) + " p" + std::to_string(p) + " d" +
           std::to_string(d) + " g" + std::to_string(G) + (bias ? " +bias" : "");
  }
};

const std::vector<Conv>& conv_cases() {
  static const std::vector<Conv> cases = {
      {2, 3, 9, 9, 4, 3, 3},
      {4, 16, 12, 12, 32, 3, 3, 1, 1},
      {2, 128, 8, 8, 16, 3, 3, 1, 1, 1, 1, false},  // reduction of 1152
      {3, 8, 11, 13, 12, 5, 3, 2, 2},               // stride 2, non-square kernel
      {2, 6, 10, 10, 6, 3, 3, 1, 2, 2},             // dilation 2
      {2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 4},         // groups 4
      {2, 16, 14, 14, 16, 3, 3, 1, 1, 1, 16},       // depthwise
      {8, 1, 28, 28, 32, 3, 3},                     // mnist's first layer
      {5, 7, 6, 6, 9, 1, 1, 1, 0, 1, 1, false},     // 1x1
  };
  return cases;
}

}  // namespace

TEST(Bf16Convolution, Forward) {
  std::mt19937 rng(21);
  for (const Conv& c : conv_cases()) {
    SCOPED_TRACE(c.str());
    HostTensor x = random_bf16({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_bf16({c.O, c.C / c.G, c.KH, c.KW}, rng);
    HostTensor b = random_bf16({c.O}, rng);
    const HostTensor* bp = c.bias ? &b : nullptr;
    expect_matches("aten.convolution.default", c.attrs(), {&x, &w, bp});
    expect_matches("trainstep.conv2d_relu", c.attrs(), {&x, &w, bp});
  }
}

// A 1-D convolution runs as the 2-D one with H = 1.
TEST(Bf16Convolution, OneDimensional) {
  std::mt19937 rng(22);
  HostTensor x = random_bf16({3, 8, 40}, rng), w = random_bf16({6, 8, 5}, rng);
  HostTensor b = random_bf16({6}, rng), go = random_bf16({3, 6, 19}, rng);
  json a = {{"stride", {2}},         {"padding", {1}},         {"dilation", {1}},
            {"transposed", false}, {"output_padding", {0}}, {"groups", 1}};
  expect_matches("aten.convolution.default", a, {&x, &w, &b});
  a["bias_sizes"] = {6};
  a["output_mask"] = {true, true, true};
  expect_matches("aten.convolution_backward.default", a, {&go, &x, &w});
}

TEST(Bf16Convolution, Backward) {
  std::mt19937 rng(23);
  const std::vector<std::vector<bool>> masks = {{true, true, true},  {true, false, false},
                                                {false, true, false}, {false, false, true},
                                                {false, true, true},  {true, true, false}};
  for (const Conv& c : conv_cases()) {
    SCOPED_TRACE(c.str());
    HostTensor x = random_bf16({c.N, c.C, c.H, c.W}, rng);
    HostTensor w = random_bf16({c.O, c.C / c.G, c.KH, c.KW}, rng);
    HostTensor go = random_bf16({c.N, c.O, c.out(c.H, c.KH), c.out(c.W, c.KW)}, rng);
    for (const auto& m : masks) {
      if (m[2] && !c.bias) continue;
      const std::vector<bool> skip = {!m[0], !m[1], !m[2]};
      expect_matches("aten.convolution_backward.default", c.bwd_attrs(m), {&go, &x, &w}, skip);
    }
    // Every gradient computed, but only grad_bias read.
    if (c.bias)
      expect_matches("aten.convolution_backward.default", c.bwd_attrs({true, true, true}),
                     {&go, &x, &w}, {true, true, false});
    // grad_input masked by the relu that made x (x's negatives and zeros).
    expect_matches("trainstep.conv_backward_relu", c.bwd_attrs({true, true, c.bias}),
                   {&go, &x, &w}, {false, false, !c.bias});
    expect_matches("trainstep.conv_backward_relu", c.bwd_attrs({true, false, false}),
                   {&go, &x, &w}, {false, true, true});
  }
}

// A large batch: grad_bias sums N*H*W values in float32, rounded once.
TEST(Bf16Convolution, GradBiasOfManyValues) {
  std::mt19937 rng(24);
  const Conv c{32, 4, 24, 24, 8, 3, 3, 1, 1};
  HostTensor x = random_bf16({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_bf16({c.O, c.C, c.KH, c.KW}, rng);
  HostTensor go = random_bf16({c.N, c.O, c.H, c.W}, rng);
  expect_matches("aten.convolution_backward.default", c.bwd_attrs({false, false, true}),
                 {&go, &x, &w}, {true, true, false});
  expect_matches("aten.convolution_backward.default", c.bwd_attrs({true, true, true}),
                 {&go, &x, &w});
}

// The relu-fused forward keeps NaN (as aten.relu does) where the post-op
// would make it 0: the plain convolution and a NaN-keeping relu run then.
TEST(Bf16Convolution, ReluKeepsNaN) {
  std::mt19937 rng(25);
  const Conv c{1, 2, 6, 6, 3, 3, 3, 1, 1};
  HostTensor x = random_bf16({1, 2, 6, 6}, rng), w = random_bf16({3, 2, 3, 3}, rng);
  HostTensor b = random_bf16({3}, rng);
  x.view.as<uint16_t>()[7] = 0x7FC0;  // NaN
  Bf16Node n("trainstep.conv2d_relu", c.attrs(), {&x, &w, &b});
  std::vector<HostTensor> got = n.run(*n.native, {&x, &w, &b});
  std::vector<HostTensor> want = n.run(*n.via_f32, {&x, &w, &b});
  int nans = 0;
  for (int64_t i = 0; i < got[0].view.numel(); ++i) {
    const float g = ts::bf16_to_float(got[0].view.as<uint16_t>()[i]);
    const float v = ts::bf16_to_float(want[0].view.as<uint16_t>()[i]);
    EXPECT_EQ(std::isnan(g), std::isnan(v)) << i;
    nans += std::isnan(g);
  }
  EXPECT_GT(nans, 0);
}

// Transposed convolutions take float32 only: a bf16 node runs them between
// conversions, exactly as the ViaFloat32 form does.
TEST(Bf16Convolution, TransposedRunsViaFloat32) {
  std::mt19937 rng(26);
  HostTensor x = random_bf16({2, 4, 5, 5}, rng), w = random_bf16({4, 3, 3, 3}, rng);
  HostTensor b = random_bf16({3}, rng);
  json a = {{"stride", {2, 2}},     {"padding", {1, 1}},         {"dilation", {1, 1}},
            {"transposed", true}, {"output_padding", {1, 1}}, {"groups", 1}};
  Bf16Node n("aten.convolution.default", a, {&x, &w, &b});
  std::vector<HostTensor> got = n.run(*n.native, {&x, &w, &b});
  std::vector<HostTensor> want = n.run(*n.via_f32, {&x, &w, &b});
  ASSERT_EQ(got[0].view.type(), want[0].view.type());
  EXPECT_EQ(0, std::memcmp(got[0].view.data, want[0].view.data, got[0].view.nbytes()));
}

TEST(Bf16Convolution, ReportsOneDnnImplementations) {
  std::mt19937 rng(27);
  const Conv c{4, 16, 12, 12, 32, 3, 3, 1, 1};
  HostTensor x = random_bf16({c.N, c.C, c.H, c.W}, rng);
  HostTensor w = random_bf16({c.O, c.C, c.KH, c.KW}, rng), b = random_bf16({c.O}, rng);
  HostTensor go = random_bf16({c.N, c.O, c.H, c.W}, rng);
  Bf16Node f("aten.convolution.default", c.attrs(), {&x, &w, &b});
  ASSERT_EQ(f.native->choices().size(), 1u);
  EXPECT_EQ(f.native->choices()[0]->describe().rfind("onednn ", 0), 0u);
  RecordProperty("fwd_impl", f.native->choices()[0]->describe());
  Bf16Node g("aten.convolution_backward.default", c.bwd_attrs({true, true, true}), {&go, &x, &w});
  const auto cs = g.native->choices();
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0]->key.rfind("conv_dgrad bf16 ", 0), 0u) << cs[0]->key;
  EXPECT_EQ(cs[1]->key.rfind("conv_wgrad bf16 ", 0), 0u) << cs[1]->key;
  for (const ts::KernelChoice* ch : cs) {
    EXPECT_EQ(ch->describe().find("ref"), std::string::npos) << ch->describe();
    RecordProperty(ch->key.substr(0, 10), ch->describe());
  }
}

// Layout planning (passes/plan_layouts.h): which activations become
// channel-blocked, that each one's producer and readers agree on it, that
// the blocked program computes exactly what the plain one does, and that
// bad layout attributes are refused with the node and port named.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "ir/rewrite.h"
#include "ir/text.h"
#include "op_test_util.h"
#include "ops/pool.h"
#include "passes/plan_layouts.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace ts_test;
using ts::HostTensor;

namespace {

const std::string kConv =
    R"({"dilation":[1,1],"groups":1,"output_padding":[0,0],"padding":[1,1],"stride":[1,1],"transposed":false)";
const std::string kPool =
    R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[2,2],"padding":[0,0],"stride":[])";

// A MNIST-like step over C-channel activations: conv -> conv -> code pool
// forward, and the backward through both convolutions. `extra_out` returns
// more values.
std::string chain_fn(int C, const std::string& extra_out = "", const std::string& extra = "") {
  const std::string c = std::to_string(C);
  return "func f(%x: float32[2, 3, 8, 8] {role=input}, %w1: float32[" + c +
         ", 3, 3, 3] {role=input, index=1}, %w2: float32[" + c + ", " + c +
         ", 3, 3] {role=input, index=2}, %dy: float32[2, " + c + ", 4, 4] {role=input, index=3}) {\n"
         "  %a = trainstep.conv2d_relu(%x, %w1) " + kConv + "}\n"
         "  %b = trainstep.conv2d_relu(%a, %w2) " + kConv + "}\n"
         "  %p, %code = trainstep.max_pool2d_code(%b) " + kPool + "}\n"
         "  %gb = trainstep.max_pool2d_code_backward(%dy, %code) " + kPool + ",\"input_size\":[8,8]}\n"
         "  %ga, %gw2, %gb2 = trainstep.conv_backward_relu(%gb, %a, %w2) " + kConv +
         ",\"bias_sizes\":[" + c + "],\"output_mask\":[true,true,true]}\n"
         "  _, %gw1, %gb1 = aten.convolution_backward.default(%ga, %x, %w1) " + kConv +
         ",\"bias_sizes\":[" + c + "],\"output_mask\":[false,true,true]}\n" + extra +
         "  return %p {role=output}, %gw2 {role=output, index=1}, %gb2 {role=output, index=2}, "
         "%gw1 {role=output, index=3}, %gb1 {role=output, index=4}" + extra_out + "\n}\n";
}

// Each value's layout as its producer records it; fails the test if a
// reader records another one.
std::map<std::string, std::string> layouts(const ts::Function& f) {
  std::map<std::string, std::string> by_value;
  auto at = [](const ts::Node& n, const char* key, int i) -> std::string {
    if (!n.attrs.contains(key) || i >= static_cast<int>(n.attrs[key].size())) return "plain";
    return n.attrs[key][i].get<std::string>();
  };
  for (const ts::Node& n : f.nodes)
    for (int j = 0; j < static_cast<int>(n.outputs.size()); ++j)
      if (n.outputs[j] >= 0) by_value[f.value_names[n.outputs[j]]] = at(n, "out_layouts", j);
  for (const ts::Node& n : f.nodes)
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
      if (n.inputs[i] < 0) continue;
      const std::string& name = f.value_names[n.inputs[i]];
      const std::string want = by_value.count(name) ? by_value[name] : "plain";
      EXPECT_EQ(at(n, "in_layouts", i), want) << "node " << n.name << " input " << i << " (" << name << ")";
    }
  return by_value;
}

std::map<std::string, std::string> planned(const std::string& text, int64_t block) {
  ts::Function f = ts::parse_function(text);
  ts::plan_layouts(f, block);
  return layouts(f);
}

TEST(PlanLayouts, BlocksActivationsThatOnlyConvolutionsAndCodePoolingTouch) {
  auto l = planned(chain_fn(16), 16);
  for (const char* v : {"a", "b", "gb", "ga"}) EXPECT_EQ(l[v], "nChw16c") << v;
  // Outputs, weight gradients and the codes stay plain.
  for (const char* v : {"p", "code", "gw2", "gb2", "gw1", "gb1"}) EXPECT_EQ(l[v], "plain") << v;
  EXPECT_EQ(planned(chain_fn(8), 8)["a"], "nChw8c");
}

TEST(PlanLayouts, KeepsPlainWhatOtherOpsOrTheCallerSee) {
  // 12 channels are not a multiple of 8 or 16.
  for (auto& [v, l] : planned(chain_fn(12), 8)) EXPECT_EQ(l, "plain") << v;
  // %a is returned: plain; then %ga must be plain too (the relu mask is
  // applied element by element over %a's layout), so the first conv's
  // backward reads it plain as well.
  auto l = planned(chain_fn(16, ", %a {role=output, index=5}"), 16);
  EXPECT_EQ(l["a"], "plain");
  EXPECT_EQ(l["ga"], "plain");
  EXPECT_EQ(l["b"], "nChw16c");
  // %b is also read by an elementwise op.
  l = planned(chain_fn(16, ", %s {role=output, index=5}",
                       "  %s = aten.sum.default(%b) {\"dtype\":null}\n"), 16);
  EXPECT_EQ(l["b"], "plain");
  EXPECT_EQ(l["a"], "nChw16c");
}

// The planned program against the plain one: identical bits, because the
// primitives are the same and only the reorders around them go away. With
// a NaN in the input (the NaN-safe convolution path) and zeros (relu ties).
TEST(PlanLayouts, BlockedProgramComputesWhatThePlainOneDoes) {
  std::mt19937 rng(11);
  for (int64_t block : {8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const int C = 16;
    HostTensor x = random_f32({2, 3, 8, 8}, rng), w1 = random_f32({C, 3, 3, 3}, rng),
               w2 = random_f32({C, C, 3, 3}, rng, -0.3f, 0.3f), dy = random_f32({2, C, 4, 4}, rng);
    x.view.as<float>()[5] = 0.f;
    if (block == 8) x.view.as<float>()[9] = std::numeric_limits<float>::quiet_NaN();
    auto run = [&](bool plan) {
      ts::Function f = ts::parse_function(chain_fn(C));
      if (plan) ts::plan_layouts(f, block);
      ts::Executor ex(f, 1, true);
      HostTensor* in[] = {&x, &w1, &w2, &dy};
      for (int i = 0; i < 4; ++i) ex.bind_input(i, in[i]->view.data);
      ex.run();
      std::vector<std::vector<float>> r;
      for (int i = 0; i < 5; ++i) {
        const ts::Tensor& t = ex.output(i);
        r.emplace_back(t.as<float>(), t.as<float>() + t.numel());
      }
      return r;
    };
    auto want = run(false), got = run(true);
    for (int i = 0; i < 5; ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      ASSERT_EQ(got[i].size(), want[i].size());
      EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), want[i].size() * 4));
    }
  }
}

// (N, C, H, W) -> (N, C/B, H, W, B)
HostTensor to_blocked(const HostTensor& x, int64_t B) {
  const auto& s = x.view.shape;
  HostTensor r(ts::DType::F32, s);
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i)
        r.view.as<float>()[((n * (C / B) + c / B) * HW + i) * B + c % B] = f32(x)[(n * C + c) * HW + i];
  return r;
}

// The code pooling pair on a blocked input against the plain kernels: 2x2
// (the AVX-512 path for 16) and 3x3 windows, margins no window covers, ties,
// zeros, NaN and -inf.
TEST(MaxPoolCodeBlocked, MatchesThePlainKernels) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  int t = 0;
  for (int64_t B : {8, 16})
    for (int64_t k : {2, 3})
      for (int64_t margin : {0, 1}) {
        SCOPED_TRACE("block " + std::to_string(B) + " window " + std::to_string(k) + " margin " +
                     std::to_string(margin));
        const int64_t H = 3 * k + margin, W = 5 * k + margin;
        HostTensor x = random_f32({2, 2 * B, H, W}, rng);
        for (int64_t i = 0; i < x.view.numel(); ++i) {
          float& v = x.view.as<float>()[i];
          if (++t % 2) v = std::round(v * 2);
          if (i % 11 == 0) v = i % 22 ? nan : -inf;
        }
        json attrs = {{"kernel_size", {k, k}}, {"stride", json::array()}, {"padding", {0, 0}},
                      {"dilation", {1, 1}}, {"ceil_mode", false}};
        auto want = run_op("trainstep.max_pool2d_code", attrs, {&x});
        HostTensor xb = to_blocked(x, B);
        json battrs = attrs;
        battrs["in_layouts"] = {B == 16 ? "nChw16c" : "nChw8c"};
        auto got = run_op("trainstep.max_pool2d_code", battrs, {&xb});
        ASSERT_EQ(0, std::memcmp(got[0].view.data, want[0].view.data, want[0].view.nbytes()));
        ASSERT_EQ(0, std::memcmp(got[1].view.data, want[1].view.data, want[1].view.nbytes()));

        HostTensor g = random_f32(want[0].view.shape, rng);
        attrs["input_size"] = {H, W};
        battrs["input_size"] = {H, W};
        battrs.erase("in_layouts");
        battrs["out_layouts"] = {B == 16 ? "nChw16c" : "nChw8c"};
        auto gwant = run_op("trainstep.max_pool2d_code_backward", attrs, {&g, &want[1]});
        // Fill the output with garbage first: every element must be written.
        OpHarness h("trainstep.max_pool2d_code_backward", battrs, {&g, &want[1]});
        std::vector<HostTensor> gout;
        gout.emplace_back(ts::DType::F32, x.view.shape);
        std::fill(gout[0].view.as<float>(), gout[0].view.as<float>() + x.view.numel(), nan);
        h.run_into({&g, &want[1]}, gout);
        HostTensor gb = to_blocked(gwant[0], B);
        ASSERT_EQ(0, std::memcmp(gout[0].view.data, gb.view.data, gb.view.nbytes()));
      }
}

TEST(Layouts, BadAttributesAreRefusedNamingTheNodeAndPort) {
  auto fails = [](const std::string& text) {
    return error_of([&] { ts::parse_function(text); });
  };
  const std::string head =
      "func f(%x: float32[2, 12, 8, 8] {role=input}, %w: float32[16, 12, 3, 3] {role=input, index=1}) {\n";
  auto conv = [&](const std::string& layouts) {
    return head + "  %y = aten.convolution.default(%x, %w) " + kConv + "," + layouts +
           "}\n  return %y {role=output}\n}\n";
  };
  EXPECT_NE(fails(conv(R"("in_layouts":["nChw16c"])")).find("input 0 has layout nChw16c but 12 channels"),
            std::string::npos);
  EXPECT_NE(fails(conv(R"("in_layouts":["plain","nChw8c"])")).find("input 1 cannot take layout nChw8c"),
            std::string::npos);
  EXPECT_NE(fails(conv(R"("out_layouts":["nchw"])")).find("unknown layout 'nchw'"), std::string::npos);
  EXPECT_NE(fails(conv(R"("out_layouts":"nChw8c")")).find("must be a list of layout names"),
            std::string::npos);
  std::string e = fails(conv(R"("out_layouts":["nChw8c","nChw8c"])"));
  EXPECT_NE(e.find("node 'y'"), std::string::npos) << e;
  EXPECT_NE(e.find("output 1 cannot take layout"), std::string::npos) << e;
  // The relu mask needs x and grad_input in one layout.
  const std::string bwd = chain_fn(16);
  std::string mixed = bwd;
  const std::string from = "\"bias_sizes\":[16],\"output_mask\":[true,true,true]}";
  mixed.replace(mixed.find(from), from.size(),
                "\"bias_sizes\":[16],\"in_layouts\":[\"plain\",\"nChw16c\",\"plain\"],"
                "\"output_mask\":[true,true,true]}");
  EXPECT_NE(fails(mixed).find("must have one layout"), std::string::npos) << fails(mixed);
}

}  // namespace

// Layout planning (passes/plan_layouts.h): which activations become
// channel-blocked, that each one's producer and readers agree on it, that
// the blocked program computes exactly what the plain one does, and that
// bad layout attributes are refused with the node and port named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "isa_levels.h"
#include "ir/rewrite.h"
#include "ir/text.h"
#include "op_test_util.h"
#include "ops/pool.h"
#include "passes/plan_layouts.h"
#include "runtime/executor.h"
#include "test_util.h"
#include "trainstep/bfloat16.h"

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
// reader records another one. Pointwise nodes record none (any layout).
std::map<std::string, std::string> layouts(const ts::Function& f) {
  std::map<std::string, std::string> by_value;
  auto at = [](const ts::Node& n, const char* key, int i) -> std::string {
    if (!n.attrs.contains(key) || i >= static_cast<int>(n.attrs[key].size())) return "plain";
    return n.attrs[key][i].get<std::string>();
  };
  for (const ts::Node& n : f.nodes) {
    if (n.def->same_index) continue;
    for (int j = 0; j < static_cast<int>(n.outputs.size()); ++j)
      if (n.outputs[j] >= 0) by_value[f.value_names[n.outputs[j]]] = at(n, "out_layouts", j);
  }
  // A pointwise node's outputs take its first large input's layout.
  for (const ts::Node& n : f.nodes) {
    if (!n.def->same_index) continue;
    std::string l = "plain";
    for (int v : n.inputs)
      if (v >= 0 && by_value.count(f.value_names[v]) && ts::shape_numel(f.value_types[v].shape) > 1)
        l = by_value[f.value_names[v]];
    for (int v : n.outputs)
      if (v >= 0) by_value[f.value_names[v]] = l;
  }
  for (const ts::Node& n : f.nodes)
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
      if (n.inputs[i] < 0 || n.def->same_index) continue;
      const std::string& name = f.value_names[n.inputs[i]];
      const std::string want = by_value.count(name) ? by_value[name] : "plain";
      EXPECT_EQ(at(n, "in_layouts", i), want) << "node " << n.name << " input " << i << " (" << name << ")";
    }
  return by_value;
}

void expect_close(const HostTensor& got, const HostTensor& want, float rtol, float atol) {
  ASSERT_EQ(got.view.shape, want.view.shape);
  EXPECT_TRUE(all_close(got, std::vector<float>(f32(want), f32(want) + want.view.numel()), rtol, atol));
}

std::map<std::string, std::string> planned(const std::string& text, int64_t block,
                                           bool channels_last = false) {
  ts::Function f = ts::parse_function(text);
  ts::plan_layouts(f, block, channels_last);
  return layouts(f);
}

// Runs the function (planned for `block` when above 1, bfloat16 values
// channels-last with `channels_last`) on the inputs and returns copies of
// its outputs.
std::vector<HostTensor> run_fn(const std::string& text, int64_t block,
                               const std::vector<const HostTensor*>& in, bool channels_last = false) {
  ts::Function f = ts::parse_function(text);
  if (block > 1) ts::plan_layouts(f, block, channels_last);
  ts::Executor ex(f, 1, true);
  for (size_t i = 0; i < in.size(); ++i) ex.bind_input(static_cast<int>(i), in[i]->view.data);
  ex.run();
  std::vector<HostTensor> r;
  for (int i = 0; i < static_cast<int>(f.outputs.size()); ++i) {
    const ts::Tensor& t = ex.output(i);
    r.emplace_back(t.dtype, t.shape);
    std::memcpy(r.back().view.data, t.data, t.nbytes());
  }
  return r;
}

TEST(PlanLayouts, BlocksActivationsThatOnlyConvolutionsAndCodePoolingTouch) {
  auto l = planned(chain_fn(16), 16);
  for (const char* v : {"a", "b", "gb", "ga"}) EXPECT_EQ(l[v], "nChw16c") << v;
  // Outputs, weight gradients and the codes stay plain.
  for (const char* v : {"p", "code", "gw2", "gb2", "gw1", "gb1"}) EXPECT_EQ(l[v], "plain") << v;
  EXPECT_EQ(planned(chain_fn(8), 8)["a"], "nChw8c");
}

// torchvision's ResNet stem: conv -> relu -> 3x3/2 pool (padding 1, as the
// code pair) -> conv, and the backward through all of it.
std::string stem_fn() {
  const std::string pool =
      R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[3,3],"padding":[1,1],"stride":[2,2])";
  return "func f(%x: float32[2, 3, 9, 9] {role=input}, %w1: float32[16, 3, 3, 3] {role=input, "
         "index=1}, %w2: float32[16, 16, 3, 3] {role=input, index=2}, %dy: float32[2, 16, 5, 5] "
         "{role=input, index=3}) {\n"
         "  %a = trainstep.conv2d_relu(%x, %w1) " + kConv + "}\n"
         "  %p, %code = trainstep.max_pool2d_code(%a) " + pool + "}\n"
         "  %b = aten.convolution.default(%p, %w2) " + kConv + "}\n"
         "  %gp, %gw2, %gb2 = aten.convolution_backward.default(%dy, %p, %w2) " + kConv +
         ",\"bias_sizes\":[16],\"output_mask\":[true,true,true]}\n"
         "  %ga = trainstep.max_pool2d_code_backward(%gp, %code) " + pool + ",\"input_size\":[9,9]}\n"
         "  _, %gw1, %gb1 = aten.convolution_backward.default(%ga, %x, %w1) " + kConv +
         ",\"bias_sizes\":[16],\"output_mask\":[false,true,true]}\n"
         "  return %b {role=output}, %gw2 {role=output, index=1}, %gb2 {role=output, index=2}, "
         "%gw1 {role=output, index=3}, %gb1 {role=output, index=4}\n}\n";
}

TEST(PlanLayouts, AnOverlappingCodePoolKeepsBothSidesBlocked) {
  for (int64_t block : {8, 16}) {
    const std::string name = block == 16 ? "nChw16c" : "nChw8c";
    auto l = planned(stem_fn(), block);
    for (const char* v : {"a", "p", "gp", "ga"}) EXPECT_EQ(l[v], name) << v;
    EXPECT_EQ(l["code"], "plain");
  }
  // And computes what the plain program does (oneDNN's convolutions in
  // both; the pool's values and the backward's scatter are exact).
  EnvVar onednn("TRAINSTEP_KERNELS", "onednn");
  std::mt19937 rng(23);
  HostTensor x = random_f32({2, 3, 9, 9}, rng), w1 = random_f32({16, 3, 3, 3}, rng),
             w2 = random_f32({16, 16, 3, 3}, rng, -0.3f, 0.3f), dy = random_f32({2, 16, 5, 5}, rng);
  const std::vector<const HostTensor*> in = {&x, &w1, &w2, &dy};
  auto want = run_fn(stem_fn(), 1, in);
  for (int64_t block : {8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    auto got = run_fn(stem_fn(), block, in);
    for (int i = 0; i < 5; ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      EXPECT_EQ(0, std::memcmp(got[i].view.data, want[i].view.data, want[i].view.nbytes()));
    }
  }
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

TEST(PlanLayouts, KeepsTransposedConvolutionsPlain) {
  // A transposed convolution's kernel takes plain layouts only: the values
  // it reads and writes stay plain; %c, between two direct convolutions,
  // is blocked.
  const std::string t =
      R"({"dilation":[1,1],"groups":1,"output_padding":[0,0],"padding":[1,1],"stride":[1,1],"transposed":true})";
  const std::string fn =
      "func f(%x: float32[2, 16, 8, 8] {role=input}, %w: float32[16, 16, 3, 3] {role=input, index=1}) {\n"
      "  %a = aten.convolution.default(%x, %w) " + kConv + "}\n"
      "  %b = aten.convolution.default(%a, %w) " + t + "\n"
      "  %c = aten.convolution.default(%b, %w) " + kConv + "}\n"
      "  %d = aten.convolution.default(%c, %w) " + kConv + "}\n"
      "  %ga, %gw, _ = aten.convolution_backward.default(%d, %a, %w) " + t.substr(0, t.size() - 1) +
      ",\"bias_sizes\":null,\"output_mask\":[true,true,false]}\n"
      "  return %d {role=output}, %ga {role=output, index=1}, %gw {role=output, index=2}\n}\n";
  auto l = planned(fn, 16);
  EXPECT_EQ(l["a"], "plain");
  EXPECT_EQ(l["b"], "plain");
  EXPECT_EQ(l["c"], "nChw16c");
}

// The planned program against the plain one: identical bits, because the
// primitives are the same and only the reorders around them go away. With
// a NaN in the input (the NaN-safe convolution path) and zeros (relu ties).
TEST(PlanLayouts, BlockedProgramComputesWhatThePlainOneDoes) {
  // oneDNN's convolutions in both: a measured Winograd pick (blocked
  // activations only) would round otherwise.
  EnvVar onednn("TRAINSTEP_KERNELS", "onednn");
  std::mt19937 rng(11);
  for (int64_t block : {8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    const int C = 16;
    HostTensor x = random_f32({2, 3, 8, 8}, rng), w1 = random_f32({C, 3, 3, 3}, rng),
               w2 = random_f32({C, C, 3, 3}, rng, -0.3f, 0.3f), dy = random_f32({2, C, 4, 4}, rng);
    x.view.as<float>()[5] = 0.f;
    if (block == 8) x.view.as<float>()[9] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<const HostTensor*> in = {&x, &w1, &w2, &dy};
    auto want = run_fn(chain_fn(C), 1, in), got = run_fn(chain_fn(C), block, in);
    ASSERT_EQ(want.size(), 5u);
    for (int i = 0; i < 5; ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      ASSERT_EQ(got[i].view.shape, want[i].view.shape);
      EXPECT_EQ(0, std::memcmp(got[i].view.data, want[i].view.data, want[i].view.nbytes()));
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

const std::string kBn = R"({"eps":1e-05,"momentum":0.1,"training":true})";
const std::string kBnBwd = R"({"eps":1e-05,"output_mask":[true,true,true],"train":true})";

// A residual block as ResNet's trace gives it: conv+relu, then conv ->
// batch norm -> + residual -> relu; and the backward through the relu mask,
// batch norm and convolution, from a gradient a convolution made.
// `extra` / `extra_out` add nodes and returns.
std::string block_fn(const std::string& extra_out = "", const std::string& extra = "") {
  return "func f(%x: float32[4, 16, 6, 6] {role=input}, %w0: float32[16, 16, 3, 3] {role=input, index=1}, "
         "%w: float32[16, 16, 3, 3] {role=input, index=2}, "
         "%gamma: float32[16] {role=input, index=3}, %beta: float32[16] {role=input, index=4}, "
         "%dy: float32[4, 16, 6, 6] {role=input, index=5}) {\n"
         "  %r0 = trainstep.conv2d_relu(%x, %w0) " + kConv + "}\n"
         "  %c = aten.convolution.default(%r0, %w) " + kConv + "}\n"
         "  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%c, %gamma, %beta, None, None) " + kBn + "\n"
         "  %s = aten.add.Tensor(%bn.0, %r0) {\"alpha\":1}\n"
         "  %r1 = aten.relu.default(%s)\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %le = aten.le.Scalar(%r1) {\"other\":0}\n"
         "  %d = aten.convolution.default(%dy, %w0) " + kConv + "}\n"
         "  %g1 = aten.where.self(%le, %zero, %d)\n"
         "  %gb.0, %gb.1, %gb.2 = aten.native_batch_norm_backward.default(%g1, %c, %gamma, None, None, %bn.1, %bn.2) " + kBnBwd + "\n"
         "  %gc.0, %gc.1, %gc.2 = aten.convolution_backward.default(%gb.0, %r0, %w) " + kConv +
         ",\"bias_sizes\":null,\"output_mask\":[true,true,false]}\n" + extra +
         "  return %gc.0 {role=output}, %gc.1 {role=output, index=1}, %gb.1 {role=output, index=2}, "
         "%gb.2 {role=output, index=3}, %bn.1 {role=output, index=4}, %bn.2 {role=output, index=5}" +
         extra_out + "\n}\n";
}

TEST(PlanLayouts, CarriesTheLayoutThroughBatchNormAndPointwiseNodes) {
  const char* set[] = {"r0", "c", "bn.0", "s", "r1", "le", "d", "g1", "gb.0"};
  auto l = planned(block_fn(), 16);
  for (const char* v : set) EXPECT_EQ(l[v], "nChw16c") << v;
  for (const char* v : {"gc.0", "gc.1", "gb.1", "bn.1"}) EXPECT_EQ(l[v], "plain") << v;
  // One reader outside the set (a sum over %g1) keeps the whole set plain.
  l = planned(block_fn(", %t {role=output, index=6}", "  %t = aten.sum.default(%g1) {\"dtype\":null}\n"), 16);
  for (const char* v : set) EXPECT_EQ(l[v], "plain") << v;
}

// The bfloat16 form under autocast: conv -> batch norm (float32 weight,
// bias and saves) -> relu -> conv, and the batch norm's backward between a
// convolution's gradient and the first convolution's backward.
std::string bf16_block_fn() {
  return "func f(%x: bfloat16[2, 16, 6, 6] {role=input}, %w0: bfloat16[16, 16, 3, 3] {role=input, index=1}, "
         "%w: bfloat16[16, 16, 3, 3] {role=input, index=2}, "
         "%gamma: float32[16] {role=input, index=3}, %beta: float32[16] {role=input, index=4}, "
         "%dy: bfloat16[2, 16, 6, 6] {role=input, index=5}) {\n"
         "  %c = aten.convolution.default(%x, %w0) " + kConv + "}\n"
         "  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%c, %gamma, %beta, None, None) " + kBn + "\n"
         "  %r = aten.relu.default(%bn.0)\n"
         "  %o = aten.convolution.default(%r, %w) " + kConv + "}\n"
         "  %d = aten.convolution.default(%dy, %w) " + kConv + "}\n"
         "  %gb.0, %gb.1, %gb.2 = aten.native_batch_norm_backward.default(%d, %c, %gamma, None, None, %bn.1, %bn.2) " + kBnBwd + "\n"
         "  %gc.0, %gc.1, %gc.2 = aten.convolution_backward.default(%gb.0, %x, %w0) " + kConv +
         ",\"bias_sizes\":null,\"output_mask\":[true,true,false]}\n"
         "  return %o {role=output}, %gc.0 {role=output, index=1}, %gc.1 {role=output, index=2}, "
         "%gb.1 {role=output, index=3}, %gb.2 {role=output, index=4}, %bn.1 {role=output, index=5}, "
         "%bn.2 {role=output, index=6}\n}\n";
}

TEST(PlanLayouts, CarriesChannelsLastThroughBfloat16BatchNorm) {
  const char* set[] = {"c", "bn.0", "r", "d", "gb.0"};
  auto l = planned(bf16_block_fn(), 16, /*channels_last=*/true);
  for (const char* v : set) EXPECT_EQ(l[v], "nhwc") << v;
  for (const char* v : {"o", "gc.0", "gc.1", "gb.1", "bn.1"}) EXPECT_EQ(l[v], "plain") << v;
  l = planned(bf16_block_fn(), 16, /*channels_last=*/false);
  for (const char* v : set) EXPECT_EQ(l[v], "plain") << v;
  // And computes what the plain program does: the convolutions run
  // channels-last either way; batch norm's nhwc kernels add their double
  // sums in another order, so values agree to a bfloat16 rounding.
  std::mt19937 rng(29);
  auto bf = [&](const ts::Shape& s, float lo, float hi) {
    HostTensor t = random_f32(s, rng, lo, hi), r(ts::DType::BF16, s);
    for (int64_t i = 0; i < t.view.numel(); ++i) r.view.as<uint16_t>()[i] = ts::float_to_bf16(f32(t)[i]);
    return r;
  };
  HostTensor x = bf({2, 16, 6, 6}, -1.f, 1.f), w0 = bf({16, 16, 3, 3}, -0.3f, 0.3f),
             w = bf({16, 16, 3, 3}, -0.3f, 0.3f), dy = bf({2, 16, 6, 6}, -1.f, 1.f);
  HostTensor gamma = random_f32({16}, rng, 0.5f, 1.5f), beta = random_f32({16}, rng);
  const std::vector<const HostTensor*> in = {&x, &w0, &w, &gamma, &beta, &dy};
  auto want = run_fn(bf16_block_fn(), 16, in, false), got = run_fn(bf16_block_fn(), 16, in, true);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    ASSERT_EQ(got[i].view.type(), want[i].view.type());
    const bool b = want[i].view.dtype == ts::DType::BF16;
    for (int64_t k = 0; k < want[i].view.numel(); ++k) {
      const float g = b ? ts::bf16_to_float(got[i].view.as<uint16_t>()[k]) : f32(got[i])[k];
      const float e = b ? ts::bf16_to_float(want[i].view.as<uint16_t>()[k]) : f32(want[i])[k];
      EXPECT_NEAR(g, e, 0x1p-7f * std::fabs(e) + 1e-3f) << k;
    }
  }
}

// The planned block against the plain one. Batch norm's blocked kernels add
// their double sums in another order, so the results agree to rounding.
TEST(PlanLayouts, BlockedBatchNormBlockComputesWhatThePlainOneDoes) {
  std::mt19937 rng(13);
  HostTensor x = random_f32({4, 16, 6, 6}, rng), w0 = random_f32({16, 16, 3, 3}, rng, -0.3f, 0.3f),
             w = random_f32({16, 16, 3, 3}, rng, -0.3f, 0.3f), gamma = random_f32({16}, rng, 0.5f, 1.5f), beta = random_f32({16}, rng),
             dy = random_f32({4, 16, 6, 6}, rng);
  const std::vector<const HostTensor*> in = {&x, &w0, &w, &gamma, &beta, &dy};
  auto want = run_fn(block_fn(), 1, in);
  for (int64_t block : {8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    auto got = run_fn(block_fn(), block, in);
    for (int i = 0; i < 6; ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      expect_close(got[i], want[i], 1e-5, 1e-5);
    }
  }
}

// Batch norm's blocked kernels against the plain ones, forward and
// backward, training and eval, with and without weight and bias, at each
// ISA level (their sums have a loop per level, block_sums.h).
TEST(BatchNormBlocked, MatchesThePlainKernels) {
  isatest::for_each_isa([](ts::CpuIsa) {
    std::mt19937 rng(17);
    for (int64_t B : {8, 16})
      for (bool train : {true, false})
        for (bool affine : {true, false}) {
          SCOPED_TRACE("block " + std::to_string(B) + (train ? " train" : " eval") +
                       (affine ? " affine" : ""));
          HostTensor x = random_f32({3, 2 * B, 5, 4}, rng, 2.f, 5.f);  // |mean| > std
          HostTensor w = random_f32({2 * B}, rng, 0.5f, 1.5f), b = random_f32({2 * B}, rng);
          HostTensor rm = random_f32({2 * B}, rng), rv = random_f32({2 * B}, rng, 0.5f, 2.f);
          HostTensor dy = random_f32(x.view.shape, rng);
          const char* name = B == 16 ? "nChw16c" : "nChw8c";
          json fa = {{"eps", 1e-5}, {"momentum", 0.1}, {"training", train}};
          std::vector<const HostTensor*> fin = {&x, affine ? &w : nullptr, affine ? &b : nullptr,
                                                train ? nullptr : &rm, train ? nullptr : &rv};
          auto want = run_op("aten.native_batch_norm.default", fa, fin);
          HostTensor xb = to_blocked(x, B);
          fin[0] = &xb;
          json fb = fa;
          fb["in_layouts"] = {name};
          fb["out_layouts"] = {name};
          auto got = run_op("aten.native_batch_norm.default", fb, fin);
          expect_close(got[0], to_blocked(want[0], B), 1e-6, 1e-6);
          if (train) {
            expect_close(got[1], want[1], 1e-6, 1e-6);
            expect_close(got[2], want[2], 1e-6, 1e-6);
          }
          json ba = {{"eps", 1e-5}, {"output_mask", {true, true, true}}, {"train", train}};
          std::vector<const HostTensor*> bin = {&dy,
                                                &x,
                                                affine ? &w : nullptr,
                                                train ? nullptr : &rm,
                                                train ? nullptr : &rv,
                                                train ? &want[1] : nullptr,
                                                train ? &want[2] : nullptr};
          auto gwant = run_op("aten.native_batch_norm_backward.default", ba, bin);
          HostTensor dyb = to_blocked(dy, B);
          bin[0] = &dyb;
          bin[1] = &xb;
          json bb = ba;
          bb["in_layouts"] = {name, name};
          bb["out_layouts"] = {name};
          auto ggot = run_op("aten.native_batch_norm_backward.default", bb, bin);
          expect_close(ggot[0], to_blocked(gwant[0], B), 1e-5, 1e-6);
          expect_close(ggot[1], gwant[1], 1e-5, 1e-6);
          expect_close(ggot[2], gwant[2], 1e-5, 1e-6);
        }
  });
}

// The code pooling pair on a blocked input against the plain kernels: 2x2
// (the AVX-512 path for 16) and 3x3 windows, margins no window covers, ties,
// zeros, NaN and -inf.
TEST(MaxPoolCodeBlocked, MatchesThePlainKernels) {
  isatest::for_each_isa([](ts::CpuIsa) {
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
  });
}

// A network's tail as its trace gives it: conv+relu, then global average
// pooling (mean over the spatial dims), and in the backward the mean's
// gradient expanded back, masked by the relu and fed to the convolution's
// backward. The mean reads the blocked activation and the expand writes a
// blocked gradient, so no reorder sits at the end of the last stage.
std::string pool_fn(bool keepdim, const std::string& dims = "[-1,-2]") {
  const std::string ms = keepdim ? "[4, 16, 1, 1]" : "[4, 16]";
  return "func f(%x: float32[4, 16, 6, 6] {role=input}, %w: float32[16, 16, 3, 3] {role=input, index=1}, "
         "%gm: float32" + ms + " {role=input, index=2}) {\n"
         "  %a = trainstep.conv2d_relu(%x, %w) " + kConv + "}\n"
         "  %m = aten.mean.dim(%a) {\"dim\":" + dims + ",\"dtype\":null,\"keepdim\":" +
         (keepdim ? "true" : "false") + "}\n"
         "  %v = aten.view.default(%gm) {\"size\":[4,16,1,1]}\n"
         "  %e = aten.expand.default(%v) {\"implicit\":false,\"size\":[4,16,6,6]}\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %le = aten.le.Scalar(%a) {\"other\":0}\n"
         "  %g = aten.where.self(%le, %zero, %e)\n"
         "  %gx, %gw, _ = aten.convolution_backward.default(%g, %x, %w) " + kConv +
         ",\"bias_sizes\":null,\"output_mask\":[true,true,false]}\n"
         "  return %m {role=output}, %gx {role=output, index=1}, %gw {role=output, index=2}\n}\n";
}

TEST(PlanLayouts, BlocksThroughASpatialMeanAndItsExpandedGradient) {
  for (bool keepdim : {true, false}) {
    auto l = planned(pool_fn(keepdim), 16);
    for (const char* v : {"a", "e", "le", "g"}) EXPECT_EQ(l[v], "nChw16c") << v;
    for (const char* v : {"m", "v", "gx", "gw"}) EXPECT_EQ(l[v], "plain") << v;
  }
  // A mean over other dims, or into float64, reads plain only, so the set
  // stays plain.
  auto l = planned(pool_fn(true, "[1,2]"), 16);
  for (const char* v : {"a", "e", "g"}) EXPECT_EQ(l[v], "plain") << v;
  std::string f64 = pool_fn(true);
  f64.replace(f64.find("\"dtype\":null"), 12, "\"dtype\":\"float64\"");
  l = planned(f64, 16);
  for (const char* v : {"a", "e", "g"}) EXPECT_EQ(l[v], "plain") << v;
}

// The planned tail against the plain one at every ISA level (the blocked
// mean's sums have a loop per level): the mean adds in another order, so
// it agrees to rounding; the expand and the backward are exact.
TEST(PlanLayouts, BlockedSpatialMeanComputesWhatThePlainOneDoes) {
  EnvVar onednn("TRAINSTEP_KERNELS", "onednn");  // as above
  isatest::for_each_isa([](ts::CpuIsa) {
    for (bool keepdim : {true, false}) {
      SCOPED_TRACE(keepdim ? "keepdim" : "no keepdim");
      std::mt19937 rng(19);
      HostTensor x = random_f32({4, 16, 6, 6}, rng), w = random_f32({16, 16, 3, 3}, rng, -0.3f, 0.3f);
      HostTensor gm = random_f32(keepdim ? ts::Shape{4, 16, 1, 1} : ts::Shape{4, 16}, rng);
      const std::vector<const HostTensor*> in = {&x, &w, &gm};
      auto want = run_fn(pool_fn(keepdim), 1, in);
      for (int64_t block : {8, 16}) {
        SCOPED_TRACE("block " + std::to_string(block));
        auto got = run_fn(pool_fn(keepdim), block, in);
        expect_close(got[0], want[0], 1e-6, 1e-7);
        for (int i = 1; i < 3; ++i)
          EXPECT_EQ(0, std::memcmp(got[i].view.data, want[i].view.data, want[i].view.nbytes())) << i;
      }
    }
  });
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
  // A blocked mean must be the spatial one.
  const std::string mean =
      "func f(%x: float32[2, 16, 4, 4] {role=input}) {\n"
      "  %m = aten.mean.dim(%x) {\"dim\":[1],\"dtype\":null,\"keepdim\":false,\"in_layouts\":[\"nChw8c\"]}\n"
      "  return %m {role=output}\n}\n";
  EXPECT_NE(fails(mean).find("a channel-blocked input needs dim [2, 3]"), std::string::npos) << fails(mean);
}

}  // namespace

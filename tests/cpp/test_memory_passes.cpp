// The passes that cut the step's memory (schedule_updates_early,
// fuse_relu_backward) as IR text in -> IR text out, and the pooling ops
// the latter creates against the unfused ops they replace.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "isa_levels.h"
#include "ir/rewrite.h"
#include "ir/text.h"
#include "op_test_util.h"
#include "test_util.h"
#include "passes/fuse_relu_backward.h"
#include "passes/schedule.h"
#include "bf16_test_util.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"

using namespace ts_test;
using ts::HostTensor;

namespace {

std::string run_pass(void (*pass)(ts::Function&), const std::string& text) {
  ts::Function f = ts::parse_function(text);
  pass(f);
  ts::compact(f);
  return ts::print_function(f);
}

// A linear layer's step: forward, loss, gradients, SGD updates of w and b in
// the trace's order (after the whole backward). Sizes make w's gradient
// "large" (> 4 KiB) and b's "small".
const std::string kHead =
    "func f(%w: float32[64, 48] {role=state, state=w}, %b: float32[64] {role=state, state=b}, "
    "%x: float32[32, 48] {role=input}, %lr: float32[] {role=lr}) {\n";
const std::string kTail =
    "  return %loss {role=loss}, %w2 {role=state, state=w}, %b2 {role=state, state=b}\n}\n";
const std::string kY = "  %y = trainstep.matmul(%x, %w) {\"trans_a\":false,\"trans_b\":true}\n";
const std::string kLoss = "  %loss = aten.sum.default(%y) {\"dtype\":null}\n";
const std::string kG =
    "  %g = aten.ones_like.default(%y) {\"device\":null,\"dtype\":\"float32\",\"layout\":null,"
    "\"memory_format\":null,\"pin_memory\":false}\n";
const std::string kGw = "  %gw = trainstep.matmul(%g, %x) {\"trans_a\":true,\"trans_b\":false}\n";
const std::string kSw = "  %sw = aten.mul.Tensor(%gw, %lr)\n";
const std::string kW2 = "  %w2 = aten.sub.Tensor(%w, %sw) {\"alpha\":1}\n";
const std::string kGb = "  %gb = aten.sum.dim_IntList(%g) {\"dim\":[0],\"dtype\":null,\"keepdim\":false}\n";
const std::string kB = "  %sb = aten.mul.Tensor(%gb, %lr)\n  %b2 = aten.sub.Tensor(%b, %sb) {\"alpha\":1}\n";

TEST(ScheduleUpdatesEarly, EachUpdateRunsAsSoonAsItsOperandsExist) {
  // b's small gradient and its update run as soon as %g exists; w's large
  // scaled gradient keeps its place, and w's update follows it at once.
  EXPECT_EQ(run_pass(ts::schedule_updates_early, kHead + kY + kG + kGw + kGb + kSw + kLoss + kB + kW2 + kTail),
            kHead + kY + kLoss + kG + kGb + kB + kGw + kSw + kW2 + kTail);
}

TEST(ScheduleUpdatesEarly, AnUpdateWaitsForEveryReaderOfTheOldState) {
  // The gradient of x reads the old w: w's update must follow it, or the
  // plan could not write the new w over the old one.
  const std::string gx = "  %gx = aten.mm.default(%g, %w)\n";
  const std::string gxs = "  %gxs = aten.sum.default(%gx) {\"dtype\":null}\n";
  const std::string tail =
      "  return %loss {role=loss}, %w2 {role=state, state=w}, %b2 {role=state, state=b}, "
      "%gxs {role=output}\n}\n";
  EXPECT_EQ(run_pass(ts::schedule_updates_early, kHead + kY + kLoss + kG + kGw + kSw + gx + gxs + kGb + kB + kW2 + tail),
            kHead + kY + kLoss + kG + kGb + kB + kGw + kSw + gx + gxs + kW2 + tail);
}

const std::string kPoolAttrs =
    R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[2,2],"padding":[0,0],"stride":[]})";

std::string pool_fn(const std::string& x, const std::string& g, const std::string& attrs,
                    const std::string& extra = "", const std::string& extra_out = "") {
  return "func f(%x: float32[" + x + "] {role=input}, %g: float32[" + g +
         "] {role=input, index=1}) {\n"
         "  %p.0, %p.1 = aten.max_pool2d_with_indices.default(%x) " + attrs + "\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %pb = aten.max_pool2d_with_indices_backward.default(%g, %x, %p.1) " + attrs + "\n"
         "  %le = aten.le.Scalar(%x) {\"other\":0}\n"
         "  %y = aten.where.self(%le, %zero, %pb)\n" + extra +
         "  return %y {role=output}, %p.0 {role=output, index=1}" + extra_out + "\n}\n";
}

TEST(FuseReluBackward, ReplacesThePairByTheCodePair) {
  ts::Function f = ts::parse_function(pool_fn("1, 2, 4, 6", "1, 2, 2, 3", kPoolAttrs));
  ts::fuse_relu_backward(f);
  // Overlapping, padded windows too (torchvision's ResNet stem).
  const std::string stem =
      R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[3,3],"padding":[1,1],"stride":[2,2]})";
  ts::Function s = ts::parse_function(pool_fn("1, 2, 8, 8", "1, 2, 4, 4", stem));
  ts::fuse_relu_backward(s);
  EXPECT_NE(ts::print_function(s).find("trainstep.max_pool2d_code_backward"), std::string::npos)
      << ts::print_function(s);
  const std::string bwd_attrs =
      R"({"ceil_mode":false,"dilation":[1,1],"input_size":[4,6],"kernel_size":[2,2],"padding":[0,0],"stride":[]})";
  EXPECT_EQ(ts::print_function(f),
            "func f(%x: float32[1, 2, 4, 6] {role=input}, %g: float32[1, 2, 2, 3] {role=input, index=1}) {\n"
            "  %p.0, %p.0.code = trainstep.max_pool2d_code(%x) " + kPoolAttrs + "\n"
            "  %y = trainstep.max_pool2d_code_backward(%g, %p.0.code) " + bwd_attrs + "\n"
            "  return %y {role=output}, %p.0 {role=output, index=1}\n}\n");
}

TEST(FuseReluBackward, LeavesWideWindowsAndSharedValuesAlone) {
  // A window of more than 128 elements has no byte code.
  const std::string wide =
      R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[12,12],"padding":[0,0],"stride":[1,1]})";
  auto unchanged = [](const std::string& text) {
    EXPECT_EQ(run_pass(ts::fuse_relu_backward, text), run_pass([](ts::Function&) {}, text));
  };
  unchanged(pool_fn("1, 2, 12, 13", "1, 2, 1, 2", wide));
  // The scattered gradient, or the indices, are read elsewhere too.
  unchanged(pool_fn("1, 2, 4, 6", "1, 2, 2, 3", kPoolAttrs, "", ", %pb {role=output, index=2}"));
  unchanged(pool_fn("1, 2, 4, 6", "1, 2, 2, 3", kPoolAttrs, "", ", %p.1 {role=output, index=2}"));
}

// The code pair equals max_pool2d_with_indices, and where(x <= 0, 0,
// pool_backward(g, x, indices)), run with the unfused ops: on ties, zeros,
// negatives, NaN, -inf and remainder rows/columns no window covers; windows
// that tile, and (from case 24) windows that overlap, pad or dilate.
TEST(MaxPoolCode, MatchesTheUnfusedOps) {
  isatest::for_each_isa([](ts::CpuIsa) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::mt19937 rng(5);
    for (int t = 0; t < 36; ++t) {
      const int64_t k = 1 + t % 3, H = k * (1 + t % 4) + t % k, W = k * (2 + t % 5) + (t / 3) % k;
      json attrs = {{"kernel_size", {k, k}}, {"stride", json::array()}, {"padding", {0, 0}},
                    {"dilation", {1, 1}}, {"ceil_mode", false}};
      if (t >= 24) {
        const int64_t s = 1 + t % 2, p = (t / 2) % 2 ? k / 2 : 0, d = t % 5 == 0 ? 2 : 1;
        attrs["stride"] = {s, s};
        attrs["padding"] = {p, p};
        attrs["dilation"] = {d, d};
        attrs["ceil_mode"] = t % 3 == 0;
      }
      HostTensor x = random_f32({2, 3, H, W}, rng);
      for (int64_t i = 0; i < x.view.numel(); ++i) {
        float& v = x.view.as<float>()[i];
        if (t % 2) v = std::round(v * 2);  // ties and exact zeros
        if (t % 4 == 3 && i % 7 == 0) v = i % 14 ? nan : -inf;
      }
      auto pooled = run_op("aten.max_pool2d_with_indices.default", attrs, {&x});
      HostTensor g = random_f32(pooled[0].view.shape, rng);
      auto scattered = run_op("aten.max_pool2d_with_indices_backward.default", attrs, {&g, &x, &pooled[1]});
      std::vector<float> want(x.view.numel());
      for (size_t i = 0; i < want.size(); ++i) want[i] = f32(x)[i] <= 0.f ? 0.f : f32(scattered[0])[i];

      SCOPED_TRACE("case " + std::to_string(t));
      auto coded = run_op("trainstep.max_pool2d_code", attrs, {&x});
      ASSERT_EQ(coded[1].view.dtype, ts::DType::U8);
      ASSERT_EQ(0, std::memcmp(coded[0].view.data, pooled[0].view.data, pooled[0].view.nbytes()));
      attrs["input_size"] = {H, W};
      auto got = run_op("trainstep.max_pool2d_code_backward", attrs, {&g, &coded[1]});
      ASSERT_EQ(got[0].view.shape, x.view.shape);
      ASSERT_EQ(0, std::memcmp(got[0].view.data, want.data(), want.size() * 4));
    }
  });
  std::mt19937 rng(5);
  HostTensor x = random_f32({1, 1, 12, 12}, rng);
  EXPECT_NE(error_of([&] {
              run_op("trainstep.max_pool2d_code",
                     {{"kernel_size", {12, 12}}, {"stride", {1, 1}}, {"padding", {0, 0}},
                      {"dilation", {1, 1}}, {"ceil_mode", false}},
                     {&x});
            }).find("windows of more than 128 elements do not fit a byte code"),
            std::string::npos);
}

}  // namespace

namespace {

const std::string kConvAttrs =
    R"({"bias_sizes":[4],"dilation":[1,1],"groups":1,"output_mask":[true,true,true],"output_padding":[0,0],"padding":[1,1],"stride":[1,1],"transposed":false})";

std::string conv_fn(const std::string& extra_out = "") {
  return "func f(%a: float32[2, 3, 5, 5] {role=input}, %w: float32[4, 3, 3, 3] {role=input, index=1}, "
         "%dy: float32[2, 4, 5, 5] {role=input, index=2}) {\n"
         "  %x = aten.relu.default(%a)\n"
         "  %cb.0, %cb.1, %cb.2 = aten.convolution_backward.default(%dy, %x, %w) " + kConvAttrs + "\n"
         "  %le = aten.le.Scalar(%x) {\"other\":0}\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %y = aten.where.self(%le, %zero, %cb.0)\n"
         "  return %y {role=output}, %cb.1 {role=output, index=1}, %cb.2 {role=output, index=2}" +
         extra_out + "\n}\n";
}

TEST(FuseReluBackward, ConvBackwardTakesTheMask) {
  EXPECT_EQ(run_pass(ts::fuse_relu_backward, conv_fn()),
            "func f(%a: float32[2, 3, 5, 5] {role=input}, %w: float32[4, 3, 3, 3] {role=input, index=1}, "
            "%dy: float32[2, 4, 5, 5] {role=input, index=2}) {\n"
            "  %x = aten.relu.default(%a)\n"
            "  %y, %cb.1, %cb.2 = trainstep.conv_backward_relu(%dy, %x, %w) " + kConvAttrs + "\n"
            "  return %y {role=output}, %cb.1 {role=output, index=1}, %cb.2 {role=output, index=2}\n}\n");
  // grad_input itself is read elsewhere: it must exist unmasked.
  const std::string shared = conv_fn(", %cb.0 {role=output, index=3}");
  EXPECT_EQ(run_pass(ts::fuse_relu_backward, shared), run_pass([](ts::Function&) {}, shared));
}

// Runs f on the inputs and returns its first `n` outputs' bfloat16 bits.
std::vector<std::vector<uint16_t>> bf16_outputs(const ts::Function& f,
                                                const std::vector<const HostTensor*>& in, int n) {
  ts::Executor ex(f, 1, true);
  for (size_t i = 0; i < in.size(); ++i) ex.bind_input(static_cast<int>(i), in[i]->view.data);
  ex.run();
  std::vector<std::vector<uint16_t>> r;
  for (int i = 0; i < n; ++i) {
    const ts::Tensor& t = ex.output(i);
    r.emplace_back(t.as<uint16_t>(), t.as<uint16_t>() + t.numel());
  }
  return r;
}

// Autocast's form of the same step: relu's backward in float32 between
// casts from and back to bfloat16.
const std::string kToF32 =
    R"({"device":null,"dtype":"float32","layout":null,"memory_format":null,"non_blocking":false,"pin_memory":null})";
const std::string kToBf16 =
    R"({"device":null,"dtype":"bfloat16","layout":null,"memory_format":null,"non_blocking":false,"pin_memory":null})";

std::string autocast_conv_fn(const std::string& extra_out = "") {
  return "func f(%a: bfloat16[2, 3, 5, 5] {role=input}, %w: bfloat16[4, 3, 3, 3] {role=input, index=1}, "
         "%dy: bfloat16[2, 4, 5, 5] {role=input, index=2}) {\n"
         "  %x = aten.relu.default(%a)\n"
         "  %cb.0, %cb.1, %cb.2 = aten.convolution_backward.default(%dy, %x, %w) " + kConvAttrs + "\n"
         "  %xf = aten._to_copy.default(%x) " + kToF32 + "\n"
         "  %le = aten.le.Scalar(%xf) {\"other\":0}\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %gf = aten._to_copy.default(%cb.0) " + kToF32 + "\n"
         "  %yf = aten.where.self(%le, %zero, %gf)\n"
         "  %y = aten._to_copy.default(%yf) " + kToBf16 + "\n"
         "  return %y {role=output}, %cb.1 {role=output, index=1}, %cb.2 {role=output, index=2}" +
         extra_out + "\n}\n";
}

TEST(FuseReluBackward, AutocastsFloat32DetourFoldsCastsAndAll) {
  EXPECT_EQ(run_pass(ts::fuse_relu_backward, autocast_conv_fn()),
            "func f(%a: bfloat16[2, 3, 5, 5] {role=input}, %w: bfloat16[4, 3, 3, 3] {role=input, index=1}, "
            "%dy: bfloat16[2, 4, 5, 5] {role=input, index=2}) {\n"
            "  %x = aten.relu.default(%a)\n"
            "  %y, %cb.1, %cb.2 = trainstep.conv_backward_relu(%dy, %x, %w) " + kConvAttrs + "\n"
            "  return %y {role=output}, %cb.1 {role=output, index=1}, %cb.2 {role=output, index=2}\n}\n");
  // The float32 gradient or its masked form is read elsewhere: nothing folds.
  for (const char* v : {"%gf", "%yf"}) {
    const std::string shared = autocast_conv_fn(std::string(", ") + v + " {role=output, index=3}");
    EXPECT_EQ(run_pass(ts::fuse_relu_backward, shared), run_pass([](ts::Function&) {}, shared)) << v;
  }
  // The widened input is: it folds, and that cast stays.
  const std::string folded = run_pass(ts::fuse_relu_backward, autocast_conv_fn(", %xf {role=output, index=3}"));
  EXPECT_NE(folded.find("trainstep.conv_backward_relu(%dy, %x, %w)"), std::string::npos) << folded;
  EXPECT_NE(folded.find("%xf = aten._to_copy.default(%x)"), std::string::npos) << folded;
  EXPECT_EQ(folded.find("aten.where"), std::string::npos) << folded;
}

// The same detour after a max pool over the relu (MNIST's conv, relu,
// pool under autocast) folds into the code pair; windows that overlap stay.
std::string autocast_pool_fn(const std::string& attrs, const std::string& g = "2, 3, 2, 3") {
  return "func f(%x: bfloat16[2, 3, 4, 6] {role=input}, %g: bfloat16[" + g + "] {role=input, index=1}) {\n"
         "  %p.0, %p.1 = aten.max_pool2d_with_indices.default(%x) " + attrs + "\n"
         "  %pb = aten.max_pool2d_with_indices_backward.default(%g, %x, %p.1) " + attrs + "\n"
         "  %xf = aten._to_copy.default(%x) " + kToF32 + "\n"
         "  %le = aten.le.Scalar(%xf) {\"other\":0}\n"
         "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
         "  %gf = aten._to_copy.default(%pb) " + kToF32 + "\n"
         "  %yf = aten.where.self(%le, %zero, %gf)\n"
         "  %y = aten._to_copy.default(%yf) " + kToBf16 + "\n"
         "  return %y {role=output}, %p.0 {role=output, index=1}\n}\n";
}

TEST(FuseReluBackward, AutocastsDetourAfterAPoolFoldsIntoTheCodePair) {
  const std::string bwd_attrs =
      R"({"ceil_mode":false,"dilation":[1,1],"input_size":[4,6],"kernel_size":[2,2],"padding":[0,0],"stride":[]})";
  EXPECT_EQ(run_pass(ts::fuse_relu_backward, autocast_pool_fn(kPoolAttrs)),
            "func f(%x: bfloat16[2, 3, 4, 6] {role=input}, %g: bfloat16[2, 3, 2, 3] {role=input, index=1}) {\n"
            "  %p.0, %p.0.code = trainstep.max_pool2d_code(%x) " + kPoolAttrs + "\n"
            "  %y = trainstep.max_pool2d_code_backward(%g, %p.0.code) " + bwd_attrs + "\n"
            "  return %y {role=output}, %p.0 {role=output, index=1}\n}\n");
  const std::string overlap =
      R"({"ceil_mode":false,"dilation":[1,1],"kernel_size":[2,2],"padding":[0,0],"stride":[1,1]})";
  const std::string text = autocast_pool_fn(overlap, "2, 3, 3, 5");
  EXPECT_EQ(run_pass(ts::fuse_relu_backward, text), run_pass([](ts::Function&) {}, text));
}

// The folded pool's bits are the detour's: NaN, zeros and -0 in the input.
TEST(MaxPoolCode, AutocastsDetourGivesTheSameBits) {
  ts::Function fused = ts::parse_function(autocast_pool_fn(kPoolAttrs));
  ts::fuse_relu_backward(fused);
  ASSERT_EQ(fused.nodes[0].op, "trainstep.max_pool2d_code");
  ts::Function plain = ts::parse_function(autocast_pool_fn(kPoolAttrs));
  std::mt19937 rng(9);
  HostTensor x = bf16_test::random_bf16({2, 3, 4, 6}, rng), g = bf16_test::random_bf16({2, 3, 2, 3}, rng);
  x.view.as<uint16_t>()[1] = 0x7FC0;
  x.view.as<uint16_t>()[5] = 0;
  x.view.as<uint16_t>()[6] = 0x8000;
  for (int i = 24; i < 30; ++i) x.view.as<uint16_t>()[i] = 0xBF80;  // a window of -1s: relu blocks
  auto want = bf16_outputs(plain, {&x, &g}, 2), got = bf16_outputs(fused, {&x, &g}, 2);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(got[i], want[i]);
  }
}

// The fold is exact: the fused bfloat16 kernel gives the detour's bits,
// NaN and zeros in the relu's input included.
TEST(ConvBackwardRelu, AutocastsDetourGivesTheSameBits) {
  ts::Function fused = ts::parse_function(autocast_conv_fn());
  ts::fuse_relu_backward(fused);
  ASSERT_EQ(fused.nodes[1].op, "trainstep.conv_backward_relu");
  ts::Function plain = ts::parse_function(autocast_conv_fn());
  std::mt19937 rng(5);
  HostTensor a = bf16_test::random_bf16({2, 3, 5, 5}, rng), w = bf16_test::random_bf16({4, 3, 3, 3}, rng),
             dy = bf16_test::random_bf16({2, 4, 5, 5}, rng);
  a.view.as<uint16_t>()[7] = 0x7FC0;  // NaN
  a.view.as<uint16_t>()[8] = 0;
  a.view.as<uint16_t>()[9] = 0x8000;  // -0
  auto want = bf16_outputs(plain, {&a, &w, &dy}, 3), got = bf16_outputs(fused, {&a, &w, &dy}, 3);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(got[i], want[i]);
  }
}

// The fused kernel against the unfused pair, on inputs with exact zeros and
// NaN; the plan writes its grad_input over the dying relu output, and the
// executor's result is the same.
TEST(ConvBackwardRelu, MatchesTheUnfusedOpsAndRunsOverItsInput) {
  ts::Function fused = ts::parse_function(conv_fn());
  ts::fuse_relu_backward(fused);
  ts::Function plain = ts::parse_function(conv_fn());
  const ts::MemoryPlan plan = ts::plan_memory(fused, true);
  const int x = fused.nodes[0].outputs[0], y = fused.nodes[1].outputs[0];
  EXPECT_EQ(plan.root[y], x);

  std::mt19937 rng(3);
  HostTensor a = random_f32({2, 3, 5, 5}, rng), w = random_f32({4, 3, 3, 3}, rng),
             dy = random_f32({2, 4, 5, 5}, rng);
  a.view.as<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  a.view.as<float>()[8] = 0.f;
  auto run = [&](const ts::Function& f) {
    ts::Executor ex(f, 1, true);
    ex.bind_input(0, a.view.data);
    ex.bind_input(1, w.view.data);
    ex.bind_input(2, dy.view.data);
    ex.run();
    std::vector<std::vector<float>> r;
    for (int i = 0; i < 3; ++i) {
      const ts::Tensor& t = ex.output(i);
      r.emplace_back(t.as<float>(), t.as<float>() + t.numel());
    }
    return r;
  };
  auto want = run(plain), got = run(fused);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), want[i].size() * 4));
  }
}

}  // namespace

// trainstep.batch_norm_relu: fuse_conv_relu folds a relu that is the only
// reader of a batch norm's output 0, and the fused kernels give exactly the
// bits of batch norm followed by aten.relu, at every layout, dtype and ISA
// level, NaN, zeros, -0.0 and tiny negatives included.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "isa_levels.h"
#include "ir/rewrite.h"
#include "ir/text.h"
#include "op_test_util.h"
#include "passes/fuse_conv_relu.h"
#include "passes/plan_layouts.h"
#include "runtime/executor.h"
#include "test_util.h"
#include "trainstep/bfloat16.h"

using namespace ts_test;
using ts::DType;
using ts::HostTensor;

namespace {

const std::string kTrain = R"({"eps":1e-05,"momentum":0.1,"training":true)";
const std::string kEval = R"({"eps":1e-05,"momentum":0.1,"training":false)";

// x -> batch norm -> relu, returning relu's value and the saves. `dt` and
// `pc` name the activation and per-channel dtypes; `layout` ("plain" for
// none) is set on the batch norm's activation ports; `extra_out` returns
// more values.
std::string bn_fn(const std::string& dt, const std::string& pc, bool train, const std::string& layout,
                  const std::string& extra_out = "", const std::string& extra = "") {
  std::string attrs = train ? kTrain : kEval;
  if (layout != "plain") attrs += ",\"in_layouts\":[\"" + layout + "\"],\"out_layouts\":[\"" + layout + "\"]";
  std::string text = "func f(%x: " + dt + "[2, 16, 5, 3] {role=input}, %gamma: " + pc +
                     "[16] {role=input, index=1}, %beta: " + pc + "[16] {role=input, index=2}";
  if (!train)
    text += ", %rm: " + pc + "[16] {role=input, index=3}, %rv: " + pc + "[16] {role=input, index=4}";
  text += ") {\n  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%x, %gamma, %beta, " +
          std::string(train ? "None, None" : "%rm, %rv") + ") " + attrs + "}\n" + extra +
          "  %r = aten.relu.default(%bn.0)\n"
          "  return %r {role=output}, %bn.1 {role=output, index=1}, %bn.2 {role=output, index=2}" +
          extra_out + "\n}\n";
  return text;
}

std::string run_pass(const std::string& text) {
  ts::Function f = ts::parse_function(text);
  ts::fuse_conv_relu(f);
  ts::compact(f);
  return ts::print_function(f);
}

std::string unchanged(const std::string& text) {
  ts::Function f = ts::parse_function(text);
  ts::compact(f);
  return ts::print_function(f);
}

TEST(FuseBatchNormRelu, ReluOfOutputZeroFolds) {
  const std::string got = run_pass(bn_fn("float32", "float32", true, "plain"));
  EXPECT_EQ(got,
            "func f(%x: float32[2, 16, 5, 3] {role=input}, %gamma: float32[16] {role=input, index=1}, "
            "%beta: float32[16] {role=input, index=2}) {\n"
            "  %r, %bn.1, %bn.2 = trainstep.batch_norm_relu(%x, %gamma, %beta, None, None) " + kTrain + "}\n"
            "  return %r {role=output}, %bn.1 {role=output, index=1}, %bn.2 {role=output, index=2}\n}\n");
  // The saves may have other readers.
  const std::string saves = run_pass(bn_fn("float32", "float32", true, "plain", ", %s {role=output, index=3}",
                                           "  %s = aten.mul.Tensor(%bn.1, %bn.2)\n"));
  EXPECT_NE(saves.find("%r, %bn.1, %bn.2 = trainstep.batch_norm_relu("), std::string::npos) << saves;
  EXPECT_EQ(saves.find("aten.relu"), std::string::npos) << saves;
}

TEST(FuseBatchNormRelu, KeepsOutputZeroThatIsReadElsewhere) {
  // Returned, read by another op too, or read by two relus: the pre-relu
  // value must exist, so nothing folds.
  for (const auto& [out, extra] : std::vector<std::pair<std::string, std::string>>{
           {", %bn.0 {role=output, index=3}", ""},
           {", %s {role=output, index=3}", "  %s = aten.sigmoid.default(%bn.0)\n"},
           {", %r2 {role=output, index=3}", "  %r2 = aten.relu.default(%bn.0)\n"}}) {
    const std::string text = bn_fn("float32", "float32", true, "plain", out, extra);
    EXPECT_EQ(run_pass(text), unchanged(text)) << out;
  }
}

// After the fold, plan_layouts treats the fused node as it treats batch
// norm: a blocked (float32) or channels-last (bfloat16) node.
TEST(FuseBatchNormRelu, PlanLayoutsLaysTheFusedNodeOutAsBatchNorm) {
  const std::string kConv =
      R"({"dilation":[1,1],"groups":1,"output_padding":[0,0],"padding":[1,1],"stride":[1,1],"transposed":false})";
  for (const char* dt : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dt);
    const std::string d = dt;
    const std::string text =
        "func f(%x: " + d + "[2, 16, 6, 6] {role=input}, %w0: " + d + "[16, 16, 3, 3] {role=input, index=1}, "
        "%w: " + d + "[16, 16, 3, 3] {role=input, index=2}, %gamma: float32[16] {role=input, index=3}, "
        "%beta: float32[16] {role=input, index=4}) {\n"
        "  %c = aten.convolution.default(%x, %w0) " + kConv + "\n"
        "  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%c, %gamma, %beta, None, None) " + kTrain + "}\n"
        "  %r = aten.relu.default(%bn.0)\n"
        "  %o = aten.convolution.default(%r, %w) " + kConv + "\n"
        "  return %o {role=output}, %bn.1 {role=output, index=1}, %bn.2 {role=output, index=2}\n}\n";
    ts::Function f = ts::parse_function(text);
    ts::fuse_conv_relu(f);
    const bool bf = d == "bfloat16";
    ts::plan_layouts(f, 16, /*channels_last=*/bf);
    const ts::Node* n = nullptr;
    for (const ts::Node& m : f.nodes)
      if (!m.dead && m.op == "trainstep.batch_norm_relu") n = &m;
    ASSERT_NE(n, nullptr) << ts::print_function(f);
    const std::string want = bf ? "nhwc" : "nChw16c";
    for (const char* k : {"in_layouts", "out_layouts"}) {
      ASSERT_TRUE(n->attrs.contains(k)) << k;
      EXPECT_EQ(n->attrs[k].at(0), want) << k << "\n" << ts::print_function(f);
    }
  }
}

// A tensor of `dt` holding `v` (bfloat16: rounded; the values are chosen
// bfloat16-exact where it matters).
HostTensor make(DType dt, const ts::Shape& s, const std::vector<float>& v) {
  HostTensor t(dt, s);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::F32) t.view.as<float>()[i] = v[i];
    if (dt == DType::F64) t.view.as<double>()[i] = v[i];
    if (dt == DType::BF16) t.view.as<uint16_t>()[i] = ts::float_to_bf16(v[i]);
  }
  return t;
}

std::vector<std::vector<char>> run(const ts::Function& f, const std::vector<const HostTensor*>& in) {
  ts::Executor ex(f, 1, true);
  for (size_t i = 0; i < in.size(); ++i) ex.bind_input(static_cast<int>(i), in[i]->view.data);
  ex.run();
  std::vector<std::vector<char>> r;
  for (int i = 0; i < static_cast<int>(f.outputs.size()); ++i) {
    const ts::Tensor& t = ex.output(i);
    const char* p = static_cast<const char*>(t.data);
    r.emplace_back(p, p + t.nbytes());
  }
  return r;
}

// The program with and without the fold, bit for bit. The layouts are set
// on the nodes, so both read the same buffer in that layout.
TEST(BatchNormRelu, GivesTheBitsOfBatchNormThenRelu) {
  struct Case {
    DType dt;
    const char* dt_name;
    const char* layout;
  };
  const Case cases[] = {{DType::F32, "float32", "plain"},  {DType::F32, "float32", "nChw8c"},
                        {DType::F32, "float32", "nChw16c"}, {DType::F64, "float64", "plain"},
                        {DType::BF16, "bfloat16", "plain"}, {DType::BF16, "bfloat16", "nhwc"}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  isatest::for_each_isa([&](ts::CpuIsa) {
    for (const Case& c : cases)
      for (bool train : {true, false}) {
        SCOPED_TRACE(std::string(c.dt_name) + " " + c.layout + (train ? " train" : " eval"));
        const DType pc = c.dt == DType::BF16 ? DType::F32 : c.dt;
        const std::string pc_name = c.dt == DType::BF16 ? "float32" : c.dt_name;
        std::mt19937 rng(41);
        std::uniform_real_distribution<float> u(-2.f, 2.f);
        std::vector<float> x(2 * 16 * 15), gamma(16), beta(16), rm(16, 0.f), rv(16);
        for (float& v : x) v = u(rng);
        for (int k = 0; k < 16; ++k) {
          gamma[k] = 0.5f + 0.0625f * float(k);
          beta[k] = 0.125f * float(k % 5) - 0.25f;
          rv[k] = 0.5f + 0.25f * float(k % 3);
        }
        // In whichever layout the kernel reads it, element i is some (n, c,
        // s); the special values below land in several channels.
        for (int i = 0; i < 480; i += 37) x[i] = 0.f;
        for (int i = 5; i < 480; i += 41) x[i] = -0.f;
        x[100] = nan;  // train: that channel's statistics (and output) are NaN
        // Eval, channels 0 and 1: running mean 0 and bias -0.0 make a -0.0
        // input give -0.0 before relu, and a tiny negative one a value that
        // rounds to -0.0 in bfloat16, which aten.relu keeps. x[0] is in
        // channel 0 and x[1] in channel 0 or 1 at every layout.
        beta[0] = beta[1] = -0.f;
        rv[0] = rv[1] = 1.f;
        gamma[0] = gamma[1] = 0.5f;
        x[0] = -0.f;
        x[1] = -std::ldexp(1.f, -133);  // the least bfloat16 denormal, negated
        x[2] = -std::ldexp(1.f, -126);
        HostTensor xt = make(c.dt, {2, 16, 5, 3}, x), gt = make(pc, {16}, gamma), bt = make(pc, {16}, beta),
                   rmt = make(pc, {16}, rm), rvt = make(pc, {16}, rv);
        std::vector<const HostTensor*> in = {&xt, &gt, &bt};
        if (!train) in.insert(in.end(), {&rmt, &rvt});

        ts::Function plain = ts::parse_function(bn_fn(c.dt_name, pc_name, train, c.layout));
        ts::Function fused = plain;
        ts::fuse_conv_relu(fused);
        ASSERT_EQ(fused.nodes.size(), 1u);
        ASSERT_EQ(fused.nodes[0].op, "trainstep.batch_norm_relu");
        const auto want = run(plain, in), got = run(fused, in);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          SCOPED_TRACE("output " + std::to_string(i));
          EXPECT_EQ(got[i], want[i]);  // bytes; eval's saves are empty (no memcmp of null)
        }
        // The inputs did produce what the test is about: NaN, +0, -0.0.
        const size_t esz = want[0].size() / 480;
        int zeros = 0, neg_zeros = 0, nans = 0;
        for (size_t k = 0; k < 480; ++k) {
          double v = 0;
          const char* p = want[0].data() + k * esz;
          if (c.dt == DType::F32) v = *reinterpret_cast<const float*>(p);
          if (c.dt == DType::F64) v = *reinterpret_cast<const double*>(p);
          if (c.dt == DType::BF16) v = ts::bf16_to_float(*reinterpret_cast<const uint16_t*>(p));
          nans += std::isnan(v);
          zeros += v == 0 && !std::signbit(v);
          neg_zeros += v == 0 && std::signbit(v);
        }
        EXPECT_GT(zeros, 0);
        EXPECT_GT(nans, 0);
        if (!train) {
          EXPECT_GT(neg_zeros, 0);
        }
      }
  });
}

}  // namespace

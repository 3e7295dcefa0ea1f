// One test per fuzzing finding (make fuzz; inputs kept under
// tests/fuzz/regressions/TARGET/ and replayed by FuzzCorpus): the crashing
// input, reduced, now gets a ts::Error that names the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "elem_test_util.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_util.h"

using ts_test::error_of;

namespace {

// A function over %x: float32[2] returning %y, with `body` in between.
std::string fn(const std::string& body) {
  return "func f(%x: float32[2] {role=input}) {\n" + body + "  return %y {role=output}\n}\n";
}

}  // namespace

// ir_text: a trainstep.constant without "value" threw nlohmann's
// out_of_range from the creation op's attribute reader (an "internal error").
TEST(FuzzRegressions, ConstantWithoutValue) {
  EXPECT_EQ(error_of([] {
              ts::parse_function(fn("  %c = trainstep.constant() {\"dtype\":\"int64\",\"valre\":1}\n"
                                    "  %y = aten.add.Tensor(%x, %c)\n"));
            }),
            "ir text line 2: node 'c' (trainstep.constant): missing attribute 'value'");
}

// ir_text: trainstep.fused_elementwise read its members/outputs attributes
// with nlohmann's throwing accessors; a missing or mistyped key escaped as
// nlohmann's exception.
TEST(FuzzRegressions, FusedGroupWithMalformedAttributes) {
  const std::string relu = R"({"op":"aten.relu.default","args":[["in",0]],"attrs":{}})";
  for (const std::string& attrs : std::vector<std::string>{
           R"({"members":[)" + relu + "]}",                                          // no outputs
           R"({"members":[{"op":"aten.relu.default","args":[["in","0"]],"attrs":{}}],"outputs":[0]})",
           R"({"members":[{"op":"aten.relu.default","args":[["in",0]]}],"outputs":[0]})",  // no attrs
           R"({"members":[)" + relu + R"(],"outputs":["0"]})"}) {
    std::string e = error_of([&] {
      ts::parse_function(fn("  %y = trainstep.fused_elementwise(%x) " + attrs + "\n"));
    });
    EXPECT_EQ(e.rfind("ir text line 2: node 'y' (trainstep.fused_elementwise): malformed "
                      "members/outputs attribute: [json.exception.",
                      0),
              0u)
        << attrs << "\n" << e;
  }
}

// program: a float attribute out of int64's range (alpha 1e30) on an int64
// add was converted with static_cast, which is undefined (UBSan under the
// fuzzer). A floating-point alpha on integer tensors is now refused, as
// PyTorch refuses it; a float `other` on integers goes through
// int_of_float.
TEST(FuzzRegressions, FloatAlphaOnAnIntegerOpIsRefused) {
  using namespace elemtest;
  Arg x = tensor(DType::I64, {3}, {1, -2, 3}), y = tensor(DType::I64, {3}, {5, 6, 7});
  for (double alpha : {1e30, -1e30, std::nan(""), 2.0})
    expect_error([&] { run("aten.add.Tensor", {{"alpha", alpha}}, {x, y}); },
                 "for integral input tensors, alpha must not be a floating point number");
  auto out = run("aten.add.Tensor", {{"alpha", 2}}, {x, y});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(out[0].data<int64_t>()[i], x.data<int64_t>()[i] + 2 * y.data<int64_t>()[i]);
}

namespace {

// An int64 tensor holding exactly `v` (elemtest::tensor goes through double).
elemtest::Arg int64s(const std::vector<int64_t>& v) {
  elemtest::Arg a = elemtest::tensor(ts::DType::I64, {int64_t(v.size())},
                                     std::vector<double>(v.size(), 0.0));
  for (size_t i = 0; i < v.size(); ++i) a.data<int64_t>()[i] = v[i];
  return a;
}

int64_t wrapped(uint64_t u) { return static_cast<int64_t>(u); }

}  // namespace

// program / ir_text, running a step: integer add, mul, neg, abs, pow, sum,
// scatter_add and index_put(accumulate) overflowed int64 on hostile inputs
// (signed overflow is undefined; UBSan). They now wrap around, as PyTorch's
// CPU kernels do.
TEST(FuzzRegressions, IntegerArithmeticWrapsAround) {
  using namespace elemtest;
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> a = {lo, hi, lo, 3}, b = {lo, 1, -1, hi};
  Arg x = int64s(a), y = int64s(b);
  auto add = run("aten.add.Tensor", {{"alpha", 1}}, {x, y});
  auto add3 = run("aten.add.Tensor", {{"alpha", 3}}, {x, y});
  auto sub = run("aten.sub.Tensor", {{"alpha", 1}}, {x, y});
  auto mul = run("aten.mul.Tensor", json::object(), {x, y});
  auto neg = run("aten.neg.default", json::object(), {x});
  auto abs = run("aten.abs.default", json::object(), {x});
  auto pow = run("aten.pow.Tensor_Tensor", json::object(), {x, int64s({2, 2, 3, 40})});
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t u = uint64_t(a[i]), v = uint64_t(b[i]);
    EXPECT_EQ(add[0].data<int64_t>()[i], wrapped(u + v));
    EXPECT_EQ(add3[0].data<int64_t>()[i], wrapped(u + 3 * v));
    EXPECT_EQ(sub[0].data<int64_t>()[i], wrapped(u - v));
    EXPECT_EQ(mul[0].data<int64_t>()[i], wrapped(u * v));
    EXPECT_EQ(neg[0].data<int64_t>()[i], wrapped(0 - u));
    EXPECT_EQ(abs[0].data<int64_t>()[i], a[i] < 0 ? wrapped(0 - u) : a[i]);
  }
  uint64_t p = 1;
  for (int k = 0; k < 40; ++k) p *= 3;
  EXPECT_EQ(pow[0].data<int64_t>()[3], wrapped(p));
  EXPECT_EQ(pow[0].data<int64_t>()[0], wrapped(uint64_t(lo) * uint64_t(lo)));

  auto sum = run("aten.sum.default", {{"dtype", nullptr}}, {x});
  uint64_t s = 0;
  for (int64_t v : a) s += uint64_t(v);
  EXPECT_EQ(sum[0].data<int64_t>()[0], wrapped(s));

  auto sa = run("aten.scatter_add.default", {{"dim", 0}}, {x, int64s({0, 0, 0, 0}), y});
  uint64_t s0 = uint64_t(a[0]);
  for (int64_t v : b) s0 += uint64_t(v);
  EXPECT_EQ(sa[0].data<int64_t>()[0], wrapped(s0));

  auto ip = run("aten.index_put.default", {{"accumulate", true}}, {x, int64s({1, 1}), int64s({hi, hi})});
  EXPECT_EQ(ip[0].data<int64_t>()[1], wrapped(uint64_t(hi) * 3));
}

// ir_text, running a step: _to_copy float32 -> int64 of log(negative), a
// NaN, was a static_cast (undefined; UBSan). Float -> integer conversions
// are now total: NaN and out-of-range values give the type's minimum (x86's
// result), uint8 the low byte of the int32 conversion.
TEST(FuzzRegressions, FloatToIntegerCastIsTotal) {
  using namespace elemtest;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<double> v = {std::nan(""), inf, -inf, 1e20, -1e20, 3e9, -2.75, 2.75, 300.5};
  Arg x = tensor(DType::F32, {int64_t(v.size())}, v);
  auto i64 = run("aten._to_copy.default", {{"dtype", "int64"}}, {x});
  auto i32 = run("aten._to_copy.default", {{"dtype", "int32"}}, {x});
  auto u8 = run("aten._to_copy.default", {{"dtype", "uint8"}}, {x});
  for (size_t i = 0; i < v.size(); ++i) {
    const double t = std::trunc(v[i]);
    const bool in64 = t >= -0x1p63 && t < 0x1p63, in32 = t >= -0x1p31 && t < 0x1p31;
    const int64_t want64 = in64 ? int64_t(t) : std::numeric_limits<int64_t>::min();
    const int32_t want32 = in32 ? int32_t(t) : std::numeric_limits<int32_t>::min();
    EXPECT_EQ(i64[0].data<int64_t>()[i], want64) << v[i];
    EXPECT_EQ(i32[0].data<int32_t>()[i], want32) << v[i];
    EXPECT_EQ(u8[0].data<uint8_t>()[i], uint8_t(uint32_t(want32) & 0xff)) << v[i];
  }
}

// ir_text: arange's element count ceil((end - start) / step) was converted
// to int64 unchecked (end 1e300: undefined; UBSan), and a NaN step passed
// the sign check. Both are refused at verify now.
TEST(FuzzRegressions, ArangeCountIsChecked) {
  using namespace elemtest;
  expect_error([] { infer("aten.arange.default", {{"end", 1e300}, {"dtype", nullptr}}, {}); },
               "arange has more than 2^40 elements");
  expect_error([] { infer("aten.arange.start_step",
                          {{"start", 0}, {"end", 1}, {"step", std::nan("")}, {"dtype", nullptr}}, {}); },
               "arange step must be finite");
  auto r = run("aten.arange.start_step", {{"start", 1e19}, {"end", 1.0000000000001e19}, {"step", 1e6},
                                          {"dtype", "int64"}}, {});
  for (int64_t i = 0; i < r[0].numel(); ++i)
    EXPECT_EQ(r[0].data<int64_t>()[i], std::numeric_limits<int64_t>::min());
}

// ir_text: IR text types had no element limit (program JSON has 2^40), and
// node types are inferred there, so float32[2^62, 4] or an expand to
// [2^62, 2^62] overflowed int64 in numel() (UBSan) in the passes and the
// memory plan. Both the text's types and every inferred type are checked.
TEST(FuzzRegressions, IrTextShapesAreLimited) {
  const std::string big = std::to_string(int64_t(1) << 62);
  EXPECT_EQ(error_of([&] {
              ts::parse_function("func f(%x: float32[" + big + ", 4] {role=input}) {\n"
                                 "  %y = aten.relu.default(%x)\n  return %y {role=output}\n}\n");
            }),
            "ir text line 1: type float32[" + big + ", 4]: more than 2^40 elements");
  EXPECT_EQ(error_of([&] {
              ts::parse_function(fn("  %y = aten.expand.default(%x) {\"size\":[" + big + "," + big +
                                    ",2]}\n"));
            }),
            "ir text line 2: node 'y' (aten.expand.default): output 0 is float32[" + big + ", " + big +
                ", 2]: more than 2^40 elements");
}

// ir_text: attribute arithmetic overflowed int64 at verify: as_strided's
// last element read (size [3, 3], stride [2^62, 2^62] wrapped to 0 and
// passed the bounds check: the kernel would read far outside its input),
// view's product of sizes, slice's length with a huge step, conv's output
// size with a huge padding or dilation, and max_pool's. All are checked now.
TEST(FuzzRegressions, AttributeArithmeticIsOverflowChecked) {
  using namespace elemtest;
  const int64_t big = int64_t(1) << 62, max = std::numeric_limits<int64_t>::max();
  Arg x = tensor(DType::F32, {4}, {1, 2, 3, 4});
  expect_error([&] { infer("aten.as_strided.default",
                           {{"size", {3, 3}}, {"stride", {big, big}}, {"storage_offset", 0}}, {x}); },
               "reads element " + std::to_string(max) + " of float32[4]");
  expect_error([&] { infer("aten.as_strided.default",
                           {{"size", {2}}, {"stride", {max}}, {"storage_offset", 1}}, {x}); },
               "reads element " + std::to_string(max) + " of float32[4]");
  expect_error([&] { infer("aten.view.default", {{"size", {-1, big, 8}}},
                           {tensor(DType::F32, {0}, {})}); },
               "invalid size");

  std::mt19937 rng(1);
  Arg m = random(DType::F32, {4, 3}, rng);
  auto s = run("aten.slice.Tensor", {{"dim", 0}, {"start", 1}, {"end", max}, {"step", max}}, {m});
  ASSERT_EQ(s[0].t->view.shape, Shape({1, 3}));
  for (int j = 0; j < 3; ++j) EXPECT_EQ(s[0].data<float>()[j], m.data<float>()[3 + j]);

  Arg img = random(DType::F32, {1, 1, 4, 4}, rng), w = random(DType::F32, {1, 1, 3, 3}, rng);
  Arg bias = tensor(DType::F32, {1}, {0});
  const json conv = {{"dilation", {1, 1}}, {"groups", 1}, {"output_padding", {0, 0}},
                     {"padding", {0, 0}}, {"stride", {1, 1}}, {"transposed", false}};
  for (const char* k : {"padding", "dilation"}) {
    json a = conv;
    a[k] = {big, 1};
    expect_error([&] { infer("aten.convolution.default", a, {img, w, bias}); }, "overflow int64");
  }
  json g = conv;  // weight channels * groups overflows; no out channels, so divisible
  g["groups"] = big;
  expect_error([&] { infer("aten.convolution.default", g,
                           {img, tensor(DType::F32, {0, 4, 3, 3}, {}), bias}); },
               "expects more than int64 holds");
  expect_error([&] { infer("aten.max_pool2d_with_indices.default",
                           {{"ceil_mode", true}, {"dilation", {1, 1}}, {"kernel_size", {max, 2}},
                            {"padding", {max / 2, 0}}, {"stride", {1, 1}}}, {img}); },
               "overflow int64");
}

namespace {

// Compiles an IR text function with `o` and runs it once on `in` (one
// buffer per function input, in order).
std::unique_ptr<ts::Executor> compile_and_run(ts::Function& f, const ts::CompileOptions& o,
                                              std::vector<elemtest::Arg>& in) {
  ts::optimize(f, o);
  auto ex = std::make_unique<ts::Executor>(f, 1, o.inplace);
  for (size_t i = 0; i < in.size(); ++i) ex->bind_input(int(i), in[i].tensor().data);
  ex->run();
  return ex;
}

}  // namespace

// program / ir_text, running a step: native_batch_norm whose normalised
// output nobody reads (only its saved statistics) wrote that output through
// the null pointer the executor passes for unused outputs.
TEST(FuzzRegressions, BatchNormWithUnusedOutput) {
  using namespace elemtest;
  ts::Function f = ts::parse_function(
      "func f(%x: float32[2, 3, 2, 2] {role=input}, %w: float32[3] {role=state, state=w}, "
      "%b: float32[3] {role=state, state=b}) {\n"
      "  _, %m, %v = aten.native_batch_norm.default(%x, %w, %b, None, None) "
      "{\"eps\":1e-05,\"momentum\":0.1,\"training\":true}\n"
      "  return %m {role=output}, %v {role=output, index=1}\n}\n");
  std::mt19937 rng(2);
  std::vector<Arg> in = {random(DType::F32, {2, 3, 2, 2}, rng), random(DType::F32, {3}, rng),
                         random(DType::F32, {3}, rng)};
  auto ex = compile_and_run(f, ts::CompileOptions{}, in);
  // The saved mean is still computed: the mean of each channel.
  const float* x = in[0].data<float>();
  for (int c = 0; c < 3; ++c) {
    double s = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) s += x[(n * 3 + c) * 4 + i];
    EXPECT_NEAR(ex->output(0).as<float>()[c], s / 8, 1e-6);
  }
}

// program / ir_text with cleanup off: a node nobody reads was run with a
// null output, which _log_softmax (like most single-output kernels) wrote
// through. The executor now builds such a node's kernel but never runs it.
TEST(FuzzRegressions, DeadNodeWithoutCleanupIsNotRun) {
  using namespace elemtest;
  ts::Function f = ts::parse_function(
      "func f(%x: float32[2, 3] {role=input}) {\n"
      "  %s = aten._log_softmax.default(%x) {\"dim\":1,\"half_to_float\":false}\n"
      "  %y = aten.relu.default(%x)\n  return %y {role=output}\n}\n");
  std::mt19937 rng(3);
  std::vector<Arg> in = {random(DType::F32, {2, 3}, rng)};
  ts::CompileOptions o;
  o.cleanup = o.fusion = o.inplace = false;
  auto ex = compile_and_run(f, o, in);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(ex->output(0).as<float>()[i], std::max(in[0].data<float>()[i], 0.f));
}

// program / ir_text, running a step with hostile integers: the max_pool
// backward silently skipped indices outside the input plane (they come from
// the graph, so a program may pass any); like the index ops it now refuses
// them, naming the node, before touching memory.
TEST(FuzzRegressions, MaxPoolBackwardRefusesBadIndices) {
  using namespace elemtest;
  std::mt19937 rng(4);
  const json attrs = {{"kernel_size", {2, 2}}, {"stride", {2, 2}}, {"padding", {0, 0}},
                      {"dilation", {1, 1}}, {"ceil_mode", false}};
  Arg x = random(DType::F32, {1, 1, 4, 4}, rng), g = random(DType::F32, {1, 1, 2, 2}, rng);
  for (int64_t bad : {int64_t(-1), int64_t(16), std::numeric_limits<int64_t>::min()}) {
    Arg idx = int64s({0, 3, bad, 5});
    idx.t->view.shape = {1, 1, 2, 2};
    expect_error([&] { run("aten.max_pool2d_with_indices_backward.default", attrs, {g, x, idx}); },
                 "node 'n1' (aten.max_pool2d_with_indices_backward.default): index " +
                     std::to_string(bad) + " is out of bounds for an input plane of " +
                     std::to_string(x.numel()) + " elements");
  }
}

// ir_text, running a step: max_pool's general path found a window's first
// row inside the input by adding the dilation until it was >= 0, one step
// per padded row: padding 2^39 hung the step. It is one division now.
TEST(FuzzRegressions, MaxPoolHugePaddingDoesNotHang) {
  using namespace elemtest;
  std::mt19937 rng(5);
  const int64_t k = int64_t(1) << 40;
  Arg x = random(DType::F32, {1, 1, 4, 4}, rng);
  auto out = run("aten.max_pool2d_with_indices.default",
                 {{"kernel_size", {k, 2}}, {"stride", {k, 1}}, {"padding", {k / 2, 0}},
                  {"dilation", {1, 1}}, {"ceil_mode", false}},
                 {x});
  // One window row covering every input row; 1x2 windows across.
  ASSERT_EQ(out[0].t->view.shape, Shape({1, 1, 1, 3}));
  const float* xs = x.data<float>();
  for (int w = 0; w < 3; ++w) {
    float best = -std::numeric_limits<float>::infinity();
    for (int h = 0; h < 4; ++h) best = std::max({best, xs[h * 4 + w], xs[h * 4 + w + 1]});
    EXPECT_EQ(out[0].data<float>()[w], best);
    EXPECT_EQ(xs[out[1].data<int64_t>()[w]], best);
  }
}

// Found while building kernels for the fuzzer's run path (not a fuzzer
// finding): a program's type for an output nobody reads (null, or anything)
// was never checked, yet kernels were built with it (some size scratch by
// their output types). verify_function now replaces it with the inferred one.
TEST(FuzzRegressions, UnusedOutputGetsItsInferredType) {
  using nlohmann::json;
  const json fn = json::parse(R"({
    "inputs": [{"name": "x", "role": "input", "dtype": "float32", "shape": [1, 1, 4, 4]}],
    "nodes": [{"name": "p", "op": "aten.max_pool2d_with_indices.default", "inputs": ["x"],
               "attrs": {"kernel_size": [2, 2], "stride": [], "padding": [0, 0],
                         "dilation": [1, 1], "ceil_mode": false},
               "outputs": ["p", null],
               "types": [{"dtype": "float32", "shape": [1, 1, 2, 2]},
                         {"dtype": "float32", "shape": [1099511627776]}]}],
    "outputs": [{"value": "p", "role": "output", "dtype": "float32", "shape": [1, 1, 2, 2]}]})");
  json p = {{"format", "trainstep"}, {"version", 1}, {"name", "m"}, {"batch_size", 1},
            {"state", json::array()}, {"functions", {{"train_step", fn}, {"eval_step", fn}}}};
  const ts::Program prog = ts::parse_program(p, "m.tstep");
  const ts::Node& n = prog.function("eval_step").nodes[0];
  EXPECT_EQ(n.declared[1], (ts::TensorType{ts::DType::I64, {1, 1, 2, 2}}));
}

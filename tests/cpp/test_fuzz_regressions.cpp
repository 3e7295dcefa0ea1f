// One test per fuzzing finding (make fuzz; inputs kept under
// tests/fuzz/regressions/TARGET/ and replayed by FuzzCorpus): the crashing
// input, reduced, now gets a ts::Error that names the problem.
#include <gtest/gtest.h>

#include <cmath>

#include "elem_test_util.h"
#include "ir/text.h"
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

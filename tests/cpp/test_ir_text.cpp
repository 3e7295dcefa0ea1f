// The IR text form: round trips, inferred types, and errors that name lines.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "test_util.h"

namespace {

using ts::parse_function;
using ts::print_function;
using ts_test::error_of;

void expect_round_trip(const std::string& text) {
  EXPECT_EQ(print_function(parse_function(text)), text);
}

TEST(IrText, RoundTripsSimpleFunction) {
  expect_round_trip(
      "func f(%x: float32[4, 3] {role=input}, %w: float32[3] {role=state, state=w}) {\n"
      "  %a = aten.mul.Tensor(%x, %w)\n"
      "  %c = trainstep.constant() {\"dtype\":\"int64\",\"value\":1,\"wrapped\":true}\n"
      "  %b = aten.mul.Tensor(%a, %c)\n"
      "  return %b {role=loss}, %a {role=state, state=w}\n"
      "}\n");
}

TEST(IrText, RoundTripsMultiOutputsNoneAndIndices) {
  expect_round_trip(
      "func g(%x: float32[2, 3, 8, 8] {role=input, index=1}, %seed: int64[] {role=rng_seed}, "
      "%off: int64[] {role=rng_offset}) {\n"
      "  %p.0, _ = aten.max_pool2d_with_indices.default(%x) "
      "{\"ceil_mode\":false,\"dilation\":[1,1],\"kernel_size\":[2,2],\"padding\":[0,0],\"stride\":[]}\n"
      "  %r = trainstep.philox_uniform.default(%seed, %off) {\"key\":3,\"shape\":[2,3,4,4]}\n"
      "  %s = aten.add.Tensor(%p.0, %r)\n"
      "  return %s {role=output, index=2}\n"
      "}\n");
}

TEST(IrText, OutputNamesRoundTripAndStayOffInputs) {
  const std::string text =
      "func h(%x: float32[2] {role=input}) {\n"
      "  %a = aten.neg.default(%x)\n"
      "  return %a {role=output, name=output/mu}, %x {role=output, index=1, name=output/0/h}\n"
      "}\n";
  expect_round_trip(text);
  ts::Function f = parse_function(text);
  EXPECT_EQ(f.outputs[0].name, "output/mu");
  EXPECT_EQ(f.outputs[1].name, "output/0/h");
  // An output without a name has none (not its value's name).
  EXPECT_EQ(parse_function("func k(%x: float32[2] {role=input}) {\n  return %x {role=output}\n}\n")
                .outputs[0].name, "");
  // An input's name is its value's: `name=` there is refused.
  EXPECT_NE(error_of([] {
              parse_function("func k(%x: float32[2] {role=input, name=y}) {\n  return\n}\n");
            }).find("unknown port attribute 'name'"),
            std::string::npos);
}

TEST(IrText, RoundTripsEmptyAndNonFinite) {
  expect_round_trip("func e() {\n  return\n}\n");
  expect_round_trip(
      "func h(%x: float32[] {role=input}) {\n"
      "  %c = trainstep.constant() {\"dtype\":\"float32\",\"value\":\"-inf\"}\n"
      "  %m = aten.maximum.default(%x, %c)\n"
      "  %z = aten.scalar_tensor.default() {\"s\":0.5}\n"
      "  return %m {role=output}, %z {role=output, index=1}\n"
      "}\n");
}

TEST(IrText, InfersTypesAndIgnoresBlankAndCommentLines) {
  ts::Function f = parse_function(
      "# a comment\n"
      "func f(%x: int64[2] {role=input}) {\n"
      "\n"
      "  %c = trainstep.constant() {\"value\": 1.5, \"wrapped\": true}\n"
      "  %y = aten.mul.Tensor(%x, %c)\n"
      "  return %y {role=output}\n"
      "}\n");
  ASSERT_EQ(f.nodes.size(), 2u);
  EXPECT_EQ(f.value_types[f.nodes[0].outputs[0]].str(), "float64[]");
  EXPECT_TRUE(f.value_types[f.nodes[0].outputs[0]].wrapped);
  EXPECT_EQ(f.value_types[f.nodes[1].outputs[0]].str(), "float32[2]");  // promotion
  EXPECT_EQ(f.outputs[0].type.str(), "float32[2]");
  EXPECT_EQ(f.nodes[1].name, "y");
  EXPECT_EQ(f.producer[f.nodes[1].outputs[0]], 1);
  EXPECT_EQ(f.producer[f.inputs[0].value], -1);
}

TEST(IrText, ErrorsNameTheLine) {
  auto err = [](const std::string& t) { return error_of([&] { parse_function(t); }); };
  EXPECT_NE(err("func f() {\n  %a = aten.relu.default(%nope)\n}\n").find("line 2: value 'nope' is not defined"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n  %x = aten.relu.default(%x)\n}\n")
                .find("line 2: value 'x' is defined twice"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n\n  %a = aten.nope(%x)\n}\n")
                .find("line 3: unknown op 'aten.nope'"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n  %a = aten.mm.default(%x, %x)\n}\n").find("line 2:"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n  %a = aten.relu.default(%x) {bad}\n}\n")
                .find("line 2: bad attrs JSON"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: floaty[2] {role=input}) {\n}\n").find("line 1:"), std::string::npos);
  // Roles are parsed once, here: a misspelt one names the line and the roles there are.
  EXPECT_NE(err("func f(%x: float32[2] {role=inptu}) {\n}\n")
                .find("line 1: unknown role 'inptu' (expected one of state, grad, lr, rng_seed, "
                      "rng_offset, input, target, loss, output, sample_loss, batch_loss)"),
            std::string::npos);
  EXPECT_NE(err("func f() {\n  return\n").find("missing the closing '}'"), std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n  return %x {role=output}\n"
                "  %a = aten.relu.default(%x)\n}\n")
                .find("line 3: a node after the return"),
            std::string::npos);
  EXPECT_NE(err("func f(%x: float32[2] {role=input}) {\n  %a, %b = aten.relu.default(%x)\n}\n")
                .find("line 2:"),
            std::string::npos);
}

TEST(IrText, SkipsDeadNodes) {
  ts::Function f = parse_function(
      "func f(%x: float32[2] {role=input}) {\n"
      "  %a = aten.relu.default(%x)\n"
      "  %b = aten.neg.default(%x)\n"
      "  return %b {role=output}\n"
      "}\n");
  f.nodes[0].dead = true;
  EXPECT_EQ(print_function(f),
            "func f(%x: float32[2] {role=input}) {\n"
            "  %b = aten.neg.default(%x)\n"
            "  return %b {role=output}\n"
            "}\n");
}

}  // namespace

// Cleanup passes as IR text in -> IR text out, with the cases where a rule
// must not fire.
#include <gtest/gtest.h>

#include <functional>

#include "ir/rewrite.h"
#include "ir/text.h"
#include "passes/cleanup.h"
#include "passes/pipeline.h"

namespace {

using Pass = std::function<void(ts::Function&)>;

// Parses, runs the passes in order, compacts (re-verifying) and prints.
std::string run(const std::vector<Pass>& passes, const std::string& text) {
  ts::Function f = ts::parse_function(text);
  for (const auto& p : passes) p(f);
  ts::compact(f);
  return ts::print_function(f);
}

const std::string kC1 = R"({"dtype":"int64","value":1,"wrapped":true})";
const std::string kC0 = R"({"dtype":"int64","value":0,"wrapped":true})";

// A function over %x: float32[2, 3] returning %y.
std::string fn(const std::string& body, const std::string& x = "float32[2, 3]") {
  return "func f(%x: " + x + " {role=input}) {\n" + body + "  return %y {role=output}\n}\n";
}

// ---- dce ----
TEST(Dce, RemovesUnreadNodesKeepsInputs) {
  EXPECT_EQ(run({ts::dce},
                "func f(%x: float32[2] {role=input}, %u: float32[2] {role=input, index=1}) {\n"
                "  %a = aten.relu.default(%x)\n"
                "  %b = aten.neg.default(%a)\n"
                "  %c = aten.exp.default(%x)\n"
                "  return %c {role=output}, %x {role=state, state=s}\n"
                "}\n"),
            "func f(%x: float32[2] {role=input}, %u: float32[2] {role=input, index=1}) {\n"
            "  %c = aten.exp.default(%x)\n"
            "  return %c {role=output}, %x {role=state, state=s}\n"
            "}\n");
}

TEST(Dce, DropsUnreadOutputsOfKeptNodes) {
  const std::string pool =
      R"( = aten.max_pool2d_with_indices.default(%x) {"ceil_mode":false,"dilation":[1,1],"kernel_size":[2,2],"padding":[0,0],"stride":[]})";
  EXPECT_EQ(run({ts::dce}, fn("  %p.0, %p.1" + pool + "\n  %y = aten.relu.default(%p.0)\n",
                              "float32[1, 1, 4, 4]")),
            fn("  %p.0, _" + pool + "\n  %y = aten.relu.default(%p.0)\n", "float32[1, 1, 4, 4]"));
}

// ---- cse ----
TEST(Cse, MergesSameOpInputsAttrsAndCascades) {
  EXPECT_EQ(run({ts::cse, ts::dce}, fn("  %a = aten.relu.default(%x)\n"
                                       "  %b = aten.relu.default(%x)\n"
                                       "  %c = aten.add.Tensor(%a, %b)\n"
                                       "  %d = aten.add.Tensor(%b, %a)\n"
                                       "  %y = aten.mul.Tensor(%c, %d)\n")),
            fn("  %a = aten.relu.default(%x)\n"
               "  %c = aten.add.Tensor(%a, %a)\n"
               "  %y = aten.mul.Tensor(%c, %c)\n"));
}

TEST(Cse, KeepsNodesWithDifferentAttrs) {
  // 1 and 1.0 are equal JSON but different constants (int64 vs float32).
  const std::string t = fn("  %a = trainstep.constant() {\"value\":1}\n"
                           "  %b = trainstep.constant() {\"value\":1.0}\n"
                           "  %c = aten.add.Tensor(%x, %a)\n"
                           "  %y = aten.add.Tensor(%c, %b)\n");
  EXPECT_EQ(run({ts::cse}, t), t);
}

TEST(Cse, NeverMergesRandomOps) {
  const std::string t =
      "func f(%s: int64[] {role=rng_seed}, %o: int64[] {role=rng_offset}) {\n"
      "  %a = trainstep.philox_uniform.default(%s, %o) {\"key\":0,\"shape\":[4]}\n"
      "  %b = trainstep.philox_uniform.default(%s, %o) {\"key\":1,\"shape\":[4]}\n"
      "  %c = trainstep.philox_uniform.default(%s, %o) {\"key\":1,\"shape\":[4]}\n"
      "  %d = aten.add.Tensor(%a, %b)\n"
      "  %y = aten.add.Tensor(%d, %c)\n"
      "  return %y {role=output}\n"
      "}\n";
  EXPECT_EQ(run({ts::cse}, t), t);
}

TEST(Cse, FirstNodeTakesOverOutputsItDropped) {
  const std::string pool =
      R"( = aten.max_pool2d_with_indices.default(%x) {"ceil_mode":false,"dilation":[1,1],"kernel_size":[2,2],"padding":[0,0],"stride":[]})";
  EXPECT_EQ(run({ts::cse}, fn("  %p.0, _" + pool + "\n  _, %q.1" + pool +
                                  "\n  %y = aten._to_copy.default(%q.1) {\"dtype\":\"float32\"}\n",
                              "float32[1, 1, 4, 4]")),
            fn("  %p.0, %q.1" + pool + "\n  %y = aten._to_copy.default(%q.1) {\"dtype\":\"float32\"}\n",
               "float32[1, 1, 4, 4]"));
}

// ---- fold_constants ----
TEST(Fold, EvaluatesConstantChainsWithTheOpsKernels) {
  EXPECT_EQ(run({ts::fold_constants, ts::dce},
                fn("  %a = trainstep.constant() " + kC1 + "\n"
                   "  %b = trainstep.constant() {\"dtype\":\"int64\",\"value\":3,\"wrapped\":true}\n"
                   "  %c = aten.add.Tensor(%a, %b)\n"
                   "  %d = aten.div.Tensor(%a, %c)\n"
                   "  %y = aten.mul.Tensor(%x, %d)\n")),
            fn("  %d = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.25}\n"
               "  %y = aten.mul.Tensor(%x, %d)\n"));
}

TEST(Fold, KeepsWrappedAndNonFiniteValues) {
  EXPECT_EQ(run({ts::fold_constants, ts::dce},
                fn("  %a = trainstep.constant() {\"dtype\":\"float64\",\"value\":0.0,\"wrapped\":true}\n"
                   "  %n = aten.div.Tensor(%a, %a)\n"
                   "  %y = aten.add.Tensor(%x, %n)\n")),
            fn("  %n = trainstep.constant() {\"dtype\":\"float32\",\"value\":\"nan\"}\n"
               "  %y = aten.add.Tensor(%x, %n)\n"));
}

TEST(Fold, CreationOpsWithZeroDimResults) {
  EXPECT_EQ(run({ts::fold_constants, ts::dce},
                "func f(%x: float32[] {role=input}) {\n"
                "  %s = aten.scalar_tensor.default() {\"s\":0.5}\n"
                "  %o = aten.ones_like.default(%x)\n"
                "  %a = aten.add.Tensor(%x, %s)\n"
                "  %y = aten.sub.Tensor(%a, %o)\n"
                "  return %y {role=output}\n"
                "}\n"),
            "func f(%x: float32[] {role=input}) {\n"
            "  %s = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.5}\n"
            "  %o = trainstep.constant() {\"dtype\":\"float32\",\"value\":1.0}\n"
            "  %a = aten.add.Tensor(%x, %s)\n"
            "  %y = aten.sub.Tensor(%a, %o)\n"
            "  return %y {role=output}\n"
            "}\n");
}

TEST(Fold, LeavesRandomNonZeroDimAndDataDependentNodes) {
  const std::string t =
      "func f(%x: float32[] {role=input}) {\n"
      "  %s = trainstep.constant() {\"dtype\":\"int64\",\"value\":7}\n"
      "  %r = trainstep.philox_uniform.default(%s, %s) {\"key\":0,\"shape\":[]}\n"
      "  %f = aten.full.default() {\"fill_value\":2.0,\"size\":[1]}\n"
      "  %e = aten.exp.default(%x)\n"
      "  %a = aten.add.Tensor(%r, %f)\n"
      "  %y = aten.add.Tensor(%a, %e)\n"
      "  return %y {role=output}\n"
      "}\n";
  EXPECT_EQ(run({ts::fold_constants}, t), t);
}

// ---- simplify ----
struct Rule {
  std::string in, out;
};

void expect_rules(const std::vector<Rule>& rules, const std::string& x = "float32[2, 3]") {
  for (const auto& r : rules)
    EXPECT_EQ(run({ts::simplify, ts::dce}, fn(r.in, x)), fn(r.out, x)) << r.in;
}

TEST(Simplify, ArithmeticIdentities) {
  const std::string c1 = "  %c = trainstep.constant() " + kC1 + "\n";
  const std::string c0 = "  %c = trainstep.constant() " + kC0 + "\n";
  const std::string same = "  %y = aten.relu.default(%x)\n";
  auto rule = [&](const std::string& c, const std::string& op) {
    return Rule{c + "  %m = " + op + "\n" + "  %y = aten.relu.default(%m)\n", same};
  };
  expect_rules({
      rule(c1, "aten.mul.Tensor(%x, %c)"),
      rule(c1, "aten.mul.Tensor(%c, %x)"),
      rule(c1, "aten.div.Tensor(%x, %c)"),
      rule(c0, "aten.add.Tensor(%x, %c)"),
      rule(c0, "aten.add.Tensor(%c, %x)"),
      rule(c0, "aten.sub.Tensor(%x, %c)"),
      rule(c0, "aten.add.Tensor(%x, %c) {\"alpha\":1}"),
      rule("", "aten.mul.Scalar(%x) {\"other\":1.0}"),
      rule("", "aten.sub.Scalar(%x) {\"other\":0}"),
  });
}

TEST(Simplify, ShapeAndCastIdentities) {
  expect_rules({
      {"  %a = aten.t.default(%x)\n  %b = aten.t.default(%a)\n  %y = aten.relu.default(%b)\n",
       "  %y = aten.relu.default(%x)\n"},
      {"  %a = aten.neg.default(%x)\n  %b = aten.neg.default(%a)\n  %y = aten.relu.default(%b)\n",
       "  %y = aten.relu.default(%x)\n"},
      {"  %a = aten._to_copy.default(%x) {\"dtype\":\"float32\"}\n  %y = aten.relu.default(%a)\n",
       "  %y = aten.relu.default(%x)\n"},
      {"  %a = aten.view.default(%x) {\"size\":[2,3]}\n  %y = aten.relu.default(%a)\n",
       "  %y = aten.relu.default(%x)\n"},
      {"  %a = aten.view.default(%x) {\"size\":[6]}\n"
       "  %b = aten.unsqueeze.default(%a) {\"dim\":0}\n"
       "  %y = aten.reshape.default(%b) {\"shape\":[3,-1]}\n",
       "  %y = aten.reshape.default(%x) {\"shape\":[3,-1]}\n"},
  });
}

TEST(Simplify, ReplacedFunctionOutputReadsTheOriginal) {
  EXPECT_EQ(run({ts::simplify, ts::dce},
                "func f(%x: float32[2, 3] {role=input}) {\n"
                "  %a = aten.view.default(%x) {\"size\":[6]}\n"
                "  %y = aten._unsafe_view.default(%a) {\"size\":[2,3]}\n"
                "  return %y {role=output}\n"
                "}\n"),
            "func f(%x: float32[2, 3] {role=input}) {\n"
            "  return %x {role=output}\n"
            "}\n");
}

TEST(Simplify, DoesNotFireWhenTypesWouldChange) {
  auto keeps = [](const std::string& body, const std::string& x) {
    EXPECT_EQ(run({ts::simplify, ts::dce}, fn(body, x)), fn(body, x)) << body;
  };
  // Broadcast: a 1-element tensor that is not a 0-d constant.
  keeps("  %c = aten.full.default() {\"fill_value\":1.0,\"size\":[1]}\n"
        "  %y = aten.mul.Tensor(%x, %c)\n",
        "float32[]");
  // int64 * wrapped 1.0 promotes to float32.
  keeps("  %c = trainstep.constant() {\"dtype\":\"float64\",\"value\":1.0,\"wrapped\":true}\n"
        "  %y = aten.mul.Tensor(%x, %c)\n",
        "int64[2]");
  keeps("  %y = aten.mul.Scalar(%x) {\"other\":1.0}\n", "int64[2]");
  // int / 1 is true division: float32.
  keeps("  %c = trainstep.constant() " + kC1 + "\n  %y = aten.div.Tensor(%x, %c)\n", "int64[2]");
  // 0-d float32 * a non-wrapped 0-d float64 1 promotes to float64.
  keeps("  %c = trainstep.constant() {\"dtype\":\"float64\",\"value\":1.0}\n"
        "  %y = aten.mul.Tensor(%x, %c)\n",
        "float32[]");
  // alpha scales the other operand.
  keeps("  %c = trainstep.constant() " + kC0 + "\n  %y = aten.add.Tensor(%c, %x) {\"alpha\":2}\n",
        "float32[2]");
  // 2 is not 1.
  keeps("  %c = trainstep.constant() {\"dtype\":\"int64\",\"value\":2}\n"
        "  %y = aten.mul.Tensor(%x, %c)\n",
        "float32[2]");
  keeps("  %y = aten._to_copy.default(%x) {\"dtype\":\"float64\"}\n", "float32[2]");
  keeps("  %a = aten.t.default(%x)\n  %y = aten.neg.default(%a)\n", "float32[2, 3]");
}

TEST(Simplify, KeepsTheWrappedFlag) {
  // wrapped 2 * 0-d int64 1 is int64 but not wrapped: replacing it by the
  // wrapped operand would change promotion downstream.
  const std::string t = fn("  %w = trainstep.constant() {\"dtype\":\"int64\",\"value\":2,\"wrapped\":true}\n"
                           "  %c = trainstep.constant() {\"dtype\":\"int64\",\"value\":1}\n"
                           "  %m = aten.mul.Tensor(%w, %c)\n"
                           "  %y = aten.mul.Tensor(%x, %m)\n",
                           "float32[2]");
  EXPECT_EQ(run({ts::simplify}, t), t);
}

TEST(Simplify, StoredValueCountsNotTheAttr) {
  // 1.5 stored as int64 is 1: x * 1.
  EXPECT_EQ(run({ts::simplify, ts::dce},
                fn("  %c = trainstep.constant() {\"dtype\":\"int64\",\"value\":1.5,\"wrapped\":true}\n"
                   "  %m = aten.mul.Tensor(%x, %c)\n  %y = aten.exp.default(%m)\n")),
            fn("  %y = aten.exp.default(%x)\n"));
}

// ---- the pipeline ----
TEST(Pipeline, CleanupReachesAFixedPointAcrossPasses) {
  // 0.5 * 2 folds to 1, x * 1 simplifies, the two exps merge, constants die.
  const std::string in =
      fn("  %a = trainstep.constant() {\"dtype\":\"float64\",\"value\":0.5,\"wrapped\":true}\n"
         "  %b = trainstep.constant() {\"dtype\":\"int64\",\"value\":2,\"wrapped\":true}\n"
         "  %k = aten.mul.Tensor(%a, %b)\n"
         "  %m = aten.mul.Tensor(%x, %k)\n"
         "  %e1 = aten.exp.default(%m)\n"
         "  %e2 = aten.exp.default(%x)\n"
         "  %y = aten.add.Tensor(%e1, %e2)\n");
  ts::Function f = ts::parse_function(in);
  ts::CompileOptions cleanup_only;
  cleanup_only.fusion = false;  // fusion would fold the result into one node
  ts::optimize(f, cleanup_only);
  EXPECT_EQ(ts::print_function(f), fn("  %e1 = aten.exp.default(%x)\n"
                                      "  %y = aten.add.Tensor(%e1, %e1)\n"));
  ts::Function g = ts::parse_function(in);
  ts::CompileOptions off;
  off.cleanup = false;
  off.fusion = false;
  ts::optimize(g, off);
  EXPECT_EQ(ts::print_function(g), in);
}

}  // namespace

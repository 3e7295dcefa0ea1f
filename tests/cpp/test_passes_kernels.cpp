// fold_transpose and fuse_conv_relu on small hand-built functions: the
// rewritten IR (as node_str lines) and, run through the executor, the same
// outputs as the original function.
#include <gtest/gtest.h>

#include <random>

#include "ir/rewrite.h"
#include "op_test_util.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_conv_relu.h"
#include "runtime/executor.h"

using namespace ts_test;
using ts::DType;
using ts::Function;
using ts::HostTensor;
using ts::TensorType;

namespace {

// Builds a Function node by node; every node has one output named like it.
struct Builder {
  Function f;
  int input(const std::string& name, const TensorType& t) {
    ts::Port p;
    p.name = name;
    p.role = ts::Role::Input;
    p.index = static_cast<int>(f.inputs.size());
    p.type = t;
    p.value = ts::add_value(f, name, t);
    f.inputs.push_back(p);
    return p.value;
  }
  int node(const std::string& name, const std::string& op, std::vector<int> in, const TensorType& t,
           json attrs = json::object()) {
    ts::Node n;
    n.name = name;
    n.op = op;
    n.attrs = std::move(attrs);
    n.inputs = std::move(in);
    int v = ts::add_value(f, name, t);
    f.producer[v] = static_cast<int>(f.nodes.size());
    n.outputs = {v};
    n.declared = {t};
    f.nodes.push_back(std::move(n));
    return v;
  }
  void output(int v) {
    ts::Port p;
    p.role = ts::Role::Output;
    p.index = static_cast<int>(f.outputs.size());
    p.type = f.value_types[v];
    p.value = v;
    p.name = f.value_names[v];
    f.outputs.push_back(p);
  }
  Function done() {
    ts::verify_function(f, "test");
    return f;
  }
};

TensorType F(ts::Shape s) { return {DType::F32, s}; }

std::vector<std::string> dump(const Function& f) {
  std::vector<std::string> r;
  for (const auto& n : f.nodes) r.push_back(ts::node_str(f, n));
  return r;
}

// Runs f on the given inputs; returns copies of its outputs.
std::vector<std::vector<float>> run(const Function& f, std::vector<HostTensor>& inputs) {
  ts::Executor ex(f, 1);
  for (size_t i = 0; i < inputs.size(); ++i) ex.bind_input(int(i), inputs[i].view.data);
  ex.run();
  std::vector<std::vector<float>> r;
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const float* p = ex.output(int(i)).as<float>();
    r.emplace_back(p, p + ex.output(int(i)).numel());
  }
  return r;
}

void expect_same_outputs(const Function& before, const Function& after, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<HostTensor> in;
  for (const auto& p : before.inputs) in.push_back(random_f32(p.type.shape, rng));
  auto a = run(before, in), b = run(after, in);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k)
      ASSERT_NEAR(a[i][k], b[i][k], 1e-5f + 1e-5f * std::fabs(a[i][k])) << "output " << i << " at " << k;
  }
}

// The linear layer's decomposition: forward mm(x, t(w)), grad_w as
// t(mm(t(g), x)), grad_x as mm(g, t(t(w))).
Function linear_step() {
  Builder b;
  int x = b.input("x", F({4, 3})), w = b.input("w", F({5, 3})), g = b.input("g", F({4, 5}));
  int t0 = b.node("t", "aten.t.default", {w}, F({3, 5}));
  int y = b.node("mm", "aten.mm.default", {x, t0}, F({4, 5}));
  int t1 = b.node("t_1", "aten.t.default", {g}, F({5, 4}));
  int m1 = b.node("mm_1", "aten.mm.default", {t1, x}, F({5, 3}));
  int t2 = b.node("t_2", "aten.t.default", {m1}, F({3, 5}));
  int t3 = b.node("t_3", "aten.t.default", {t0}, F({5, 3}));
  int gx = b.node("mm_2", "aten.mm.default", {g, t3}, F({4, 3}));
  int t4 = b.node("t_4", "aten.t.default", {t2}, F({5, 3}));  // grad_w back in w's layout
  b.output(y);
  b.output(gx);
  b.output(t2);
  b.output(t4);
  return b.done();
}

}  // namespace

TEST(FoldTranspose, LinearLayerPatterns) {
  Function before = linear_step(), f = before;
  ts::fold_transpose(f);
  // t_2 = t(mm_1) takes mm_1's place (its only reader); t_4 = t(t_2) then
  // reads a product that is also a function output, so it stays a copy.
  std::vector<std::string> want = {
      R"(%mm = trainstep.matmul(%x, %w, {"trans_a":false,"trans_b":true}))",
      R"(%t_2 = trainstep.matmul(%x, %g, {"trans_a":true,"trans_b":false}))",
      "%mm_2 = aten.mm.default(%g, %w)",
      "%t_4 = aten.t.default(%t_2)",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 1);
}

TEST(FoldTranspose, BothOperandsChainsAndSharedProducts) {
  Builder b;
  int a = b.input("a", F({6, 2})), c = b.input("c", F({6, 7}));
  int p = b.input("p", F({3, 2})), q = b.input("q", F({4, 3}));
  int ta = b.node("t", "aten.t.default", {a}, F({2, 6}));
  int m = b.node("mm", "aten.mm.default", {ta, c}, F({2, 7}));
  int tm = b.node("t_1", "aten.t.default", {m}, F({7, 2}));  // only reader of mm
  int tp = b.node("t_2", "aten.t.default", {p}, F({2, 3}));
  int tq = b.node("t_3", "aten.t.default", {q}, F({3, 4}));
  int both = b.node("mm_1", "aten.mm.default", {tp, tq}, F({2, 4}));
  int c1 = b.node("t_4", "aten.t.default", {p}, F({2, 3}));
  int c2 = b.node("t_5", "aten.t.default", {c1}, F({3, 2}));
  int c3 = b.node("t_6", "aten.t.default", {c2}, F({2, 3}));  // t(t(t(p))) = t(p)
  int shared = b.node("mm_2", "aten.mm.default", {q, p}, F({4, 2}));
  int ts_ = b.node("t_7", "aten.t.default", {shared}, F({2, 4}));  // mm_2 is also an output
  for (int v : {tm, both, c3, shared, ts_}) b.output(v);
  Function before = b.done(), f = before;
  ts::fold_transpose(f);
  std::vector<std::string> want = {
      R"(%t_1 = trainstep.matmul(%c, %a, {"trans_a":true,"trans_b":false}))",
      R"(%mm_1 = trainstep.matmul(%p, %q, {"trans_a":true,"trans_b":true}))",
      "%t_6 = aten.t.default(%p)",
      "%mm_2 = aten.mm.default(%q, %p)",
      "%t_7 = aten.t.default(%mm_2)",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 2);
}

// torch 2.x writes a linear layer's t(w) as permute(w, [1, 0]): it folds
// like aten.t; a 3-d permute, and one the product does not read, stay.
TEST(FoldTranspose, TwoDimPermutesFoldLikeT) {
  Builder b;
  int x = b.input("x", F({5, 3})), w = b.input("w", F({4, 3}));
  int y = b.input("y", F({2, 3, 4}));
  int pw = b.node("permute", "aten.permute.default", {w}, F({3, 4}), {{"dims", {1, 0}}});
  int m = b.node("mm", "aten.mm.default", {x, pw}, F({5, 4}));
  int p3 = b.node("permute_1", "aten.permute.default", {y}, F({4, 3, 2}), {{"dims", {2, 1, 0}}});
  int px = b.node("permute_2", "aten.permute.default", {x}, F({3, 5}), {{"dims", {1, 0}}});
  for (int v : {m, p3, px}) b.output(v);
  Function before = b.done(), f = before;
  ts::fold_transpose(f);
  std::vector<std::string> want = {
      R"(%mm = trainstep.matmul(%x, %w, {"trans_a":false,"trans_b":true}))",
      R"(%permute_1 = aten.permute.default(%y, {"dims":[2,1,0]}))",
      "%permute_2 = aten.t.default(%x)",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 3);
}

TEST(FoldTranspose, NothingToFoldLeavesTheFunction) {
  Builder b;
  int x = b.input("x", F({2, 3})), w = b.input("w", F({3, 4}));
  b.output(b.node("mm", "aten.mm.default", {x, w}, F({2, 4})));
  b.output(b.node("t", "aten.t.default", {x}, F({3, 2})));
  Function f = b.done();
  auto before = dump(f);
  ts::fold_transpose(f);
  EXPECT_EQ(dump(f), before);
}

namespace {

json conv_attrs() {
  return {{"stride", {1, 1}}, {"padding", {0, 0}}, {"dilation", {1, 1}}, {"transposed", false},
          {"output_padding", {0, 0}}, {"groups", 1}};
}

}  // namespace

TEST(FuseConvRelu, FusesWhenReluIsTheOnlyReader) {
  Builder b;
  int x = b.input("x", F({2, 3, 8, 8})), w1 = b.input("w1", F({4, 3, 3, 3}));
  int b1 = b.input("b1", F({4})), w2 = b.input("w2", F({5, 4, 3, 3}));
  int cv = b.node("convolution", "aten.convolution.default", {x, w1, b1}, F({2, 4, 6, 6}), conv_attrs());
  int r = b.node("relu", "aten.relu.default", {cv}, F({2, 4, 6, 6}));
  int cv2 = b.node("convolution_1", "aten.convolution.default", {r, w2, -1}, F({2, 5, 4, 4}), conv_attrs());
  int r2 = b.node("relu_1", "aten.relu.default", {cv2}, F({2, 5, 4, 4}));
  int le = b.node("le", "aten.le.Scalar", {r2}, {DType::Bool, {2, 5, 4, 4}}, {{"other", 0}});
  (void)le;
  b.output(r);
  b.output(r2);
  Function before = b.done(), f = before;
  ts::fuse_conv_relu(f);
  std::string a = conv_attrs().dump();
  std::vector<std::string> want = {
      "%relu = trainstep.conv2d_relu(%x, %w1, %b1, " + a + ")",
      "%relu_1 = trainstep.conv2d_relu(%relu, %w2, None, " + a + ")",
      R"(%le = aten.le.Scalar(%relu_1, {"other":0}))",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 3);
}

TEST(FuseConvRelu, KeepsConvWhosePreReluValueIsNeeded) {
  Builder b;
  int x = b.input("x", F({1, 2, 5, 5})), w = b.input("w", F({3, 2, 3, 3}));
  int cv = b.node("convolution", "aten.convolution.default", {x, w, -1}, F({1, 3, 3, 3}), conv_attrs());
  int r = b.node("relu", "aten.relu.default", {cv}, F({1, 3, 3, 3}));
  int s = b.node("sigmoid", "aten.sigmoid.default", {cv}, F({1, 3, 3, 3}));  // also reads the conv
  int cv2 = b.node("convolution_1", "aten.convolution.default", {x, w, -1}, F({1, 3, 3, 3}), conv_attrs());
  int r2 = b.node("relu_1", "aten.relu.default", {cv2}, F({1, 3, 3, 3}));
  for (int v : {r, s, r2, cv2}) b.output(v);  // convolution_1 is a function output
  Function f = b.done();
  auto before = dump(f);
  ts::fuse_conv_relu(f);
  EXPECT_EQ(dump(f), before);
}

TEST(FuseConvRelu, KeepsTransposedConvolution) {
  // A transposed convolution has no fused relu form.
  Builder b;
  json t = conv_attrs();
  t["transposed"] = true;
  int x = b.input("x", F({1, 2, 5, 5})), w = b.input("w", F({2, 3, 3, 3}));
  int cv = b.node("convolution", "aten.convolution.default", {x, w, -1}, F({1, 3, 7, 7}), t);
  b.output(b.node("relu", "aten.relu.default", {cv}, F({1, 3, 7, 7})));
  Function f = b.done();
  auto before = dump(f);
  ts::fuse_conv_relu(f);
  EXPECT_EQ(dump(f), before);
}

// fold_transpose, merge_summed_products, compose_views and fuse_conv_relu on small
// hand-built functions: the rewritten IR (as node_str lines) and, run
// through the executor, the same outputs as the original function.
#include <gtest/gtest.h>

#include <random>

#include "ir/rewrite.h"
#include "op_test_util.h"
#include "passes/compose_views.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_conv_relu.h"
#include "passes/merge_products.h"
#include "passes/pipeline.h"
#include "runtime/compile_steps.h"
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

// Autocast's linear layer: the forward casts t(w) to bfloat16 before the
// product, the backward transposes the product, casts it back to float32
// and transposes again. Casts commute with transposes, so each transpose
// moves next to its product and folds; t(t(...)) cancels.
TEST(FoldTranspose, CastsBetweenTransposesAndProductsMoveAside) {
  Builder b;
  auto B = [](ts::Shape s) { return TensorType{DType::BF16, s}; };
  const json to_bf16 = {{"dtype", "bfloat16"}}, to_f32 = {{"dtype", "float32"}};
  const char* cast = "aten._to_copy.default";
  int x = b.input("x", F({4, 3})), w = b.input("w", F({5, 3})), g = b.input("g", F({4, 5}));
  int xb = b.node("xb", cast, {x}, B({4, 3}), to_bf16);
  int t0 = b.node("t", "aten.t.default", {w}, F({3, 5}));
  int wb = b.node("wb", cast, {t0}, B({3, 5}), to_bf16);
  int y = b.node("mm", "aten.mm.default", {xb, wb}, B({4, 5}));
  int gb = b.node("gb", cast, {g}, B({4, 5}), to_bf16);
  int t1 = b.node("t_1", "aten.t.default", {gb}, B({5, 4}));
  int m1 = b.node("mm_1", "aten.mm.default", {t1, xb}, B({5, 3}));
  int t2 = b.node("t_2", "aten.t.default", {m1}, B({3, 5}));
  int c2 = b.node("gw", cast, {t2}, F({3, 5}), to_f32);
  int t3 = b.node("t_3", "aten.t.default", {c2}, F({5, 3}));
  b.output(y);
  b.output(t3);
  Function f = b.done();
  ts::fold_transpose(f);
  std::vector<std::string> got = dump(f);
  for (const auto& line : got) EXPECT_EQ(line.find("aten.t.default"), std::string::npos) << line;
  // w is cast untransposed and read transposed; the gradient's product
  // comes out in w's layout and is cast once.
  EXPECT_NE(std::find(got.begin(), got.end(),
                      R"(%t = aten._to_copy.default(%w, {"dtype":"bfloat16"}))"),
            got.end()) << ::testing::PrintToString(got);
  EXPECT_EQ(f.value_types[f.outputs[1].value], F({5, 3}));
}

// nn.Linear with a bias exports addmm(b, x, t(w)): the transpose folds into
// trainstep.addmm (trans_b), alpha and beta kept. Under autocast the
// bfloat16 copy of t(w) feeds the forward addmm and, transposed back, the
// backward's mm(g, t(cast(t(w)))): the cast moves to w, both fold.
TEST(FoldTranspose, AddmmReadsTheWeightTransposed) {
  Builder b;
  int x = b.input("x", F({4, 3})), w = b.input("w", F({5, 3})), bias = b.input("bias", F({5}));
  int x2 = b.input("x2", F({3, 4}));
  int t0 = b.node("t", "aten.t.default", {w}, F({3, 5}));
  int y = b.node("addmm", "aten.addmm.default", {bias, x, t0}, F({4, 5}), {{"beta", 0.5}, {"alpha", 2}});
  int tx = b.node("t_1", "aten.t.default", {x2}, F({4, 3}));
  int tw = b.node("t_2", "aten.t.default", {w}, F({3, 5}));
  int z = b.node("addmm_1", "aten.addmm.default", {bias, tx, tw}, F({4, 5}), {{"beta", 1}, {"alpha", 1}});
  b.output(y);
  b.output(z);
  Function before = b.done(), f = before;
  ts::fold_transpose(f);
  std::vector<std::string> want = {
      R"(%addmm = trainstep.addmm(%bias, %x, %w, {"alpha":2,"beta":0.5,"trans_a":false,"trans_b":true}))",
      R"(%addmm_1 = trainstep.addmm(%bias, %x2, %w, {"alpha":1,"beta":1,"trans_a":true,"trans_b":true}))",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 3);

  Builder c;
  auto B = [](ts::Shape s) { return TensorType{DType::BF16, s}; };
  const json to_bf16 = {{"dtype", "bfloat16"}};
  const char* cast = "aten._to_copy.default";
  int xb = c.input("xb", B({4, 3})), w2 = c.input("w", F({5, 3})), bb = c.input("bb", B({5}));
  int g = c.input("g", B({4, 5}));
  int t1 = c.node("t", "aten.t.default", {w2}, F({3, 5}));
  int wb = c.node("wb", cast, {t1}, B({3, 5}), to_bf16);
  int fwd = c.node("addmm", "aten.addmm.default", {bb, xb, wb}, B({4, 5}), {{"beta", 1}, {"alpha", 1}});
  int t2 = c.node("t_1", "aten.t.default", {wb}, B({5, 3}));
  int gx = c.node("mm", "aten.mm.default", {g, t2}, B({4, 3}));
  c.output(fwd);
  c.output(gx);
  Function g2 = c.done();
  ts::fold_transpose(g2);
  std::vector<std::string> want2 = {
      R"(%t = aten._to_copy.default(%w, {"dtype":"bfloat16"}))",
      R"(%addmm = trainstep.addmm(%bb, %xb, %t, {"alpha":1,"beta":1,"trans_a":false,"trans_b":true}))",
      "%mm = aten.mm.default(%g, %t)",
  };
  EXPECT_EQ(dump(g2), want2);
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

// Attention's backward: bmm(transpose(x, 1, 2), g) and bmm(g, transpose(y,
// -1, -2)) read x and y transposed in place. A transpose of other dims, and
// batched folds when they are off (the CUDA pipeline), stay.
TEST(FoldTranspose, BatchedTransposesFoldIntoBmm) {
  Builder b;
  int x = b.input("x", F({2, 5, 3})), g = b.input("g", F({2, 5, 4})), y = b.input("y", F({2, 6, 4}));
  int z = b.input("z", F({5, 2, 3}));
  int tx = b.node("transpose", "aten.transpose.int", {x}, F({2, 3, 5}), {{"dim0", 1}, {"dim1", 2}});
  int m0 = b.node("bmm", "aten.bmm.default", {tx, g}, F({2, 3, 4}));
  int ty = b.node("transpose_1", "aten.transpose.int", {y}, F({2, 4, 6}), {{"dim0", -1}, {"dim1", -2}});
  int m1 = b.node("bmm_1", "aten.bmm.default", {g, ty}, F({2, 5, 6}));
  int tz = b.node("transpose_2", "aten.transpose.int", {z}, F({2, 5, 3}), {{"dim0", 0}, {"dim1", 1}});
  int m2 = b.node("bmm_2", "aten.bmm.default", {tz, tx}, F({2, 5, 5}));
  for (int v : {m0, m1, m2}) b.output(v);
  Function before = b.done(), f = before, off = before;
  ts::fold_transpose(f);
  // Both readers of transpose fold it, so it goes.
  std::vector<std::string> want = {
      R"(%bmm = trainstep.matmul(%x, %g, {"trans_a":true,"trans_b":false}))",
      R"(%bmm_1 = trainstep.matmul(%g, %y, {"trans_a":false,"trans_b":true}))",
      R"(%transpose_2 = aten.transpose.int(%z, {"dim0":0,"dim1":1}))",
      R"(%bmm_2 = trainstep.matmul(%transpose_2, %x, {"trans_a":false,"trans_b":true}))",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 6);
  auto same = dump(off);
  ts::fold_transpose(off, /*batched=*/false);
  EXPECT_EQ(dump(off), same);
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

namespace {

json trans(bool a, bool b) { return {{"trans_a", a}, {"trans_b", b}}; }

}  // namespace

// The RNN weight gradient's shape: sum_t g_t^T @ h_t, added in a chain, plus
// a leaf that is not a product. The products become one over cat(g_t) and
// cat(h_t) along K (dim 0 of both here); the other leaf is added after.
TEST(MergeSummedProducts, ChainOfTransposedProductsAndAnotherLeaf) {
  Builder b;
  std::vector<int> g, h;
  for (int t = 0; t < 4; ++t) {
    g.push_back(b.input("g" + std::to_string(t), F({3, 5})));
    h.push_back(b.input("h" + std::to_string(t), F({3, 2})));
  }
  int bias = b.input("bias", F({5, 2}));
  int acc = -1;
  for (int t = 0; t < 4; ++t) {
    int p = b.node("mm_" + std::to_string(t), "trainstep.matmul", {g[t], h[t]}, F({5, 2}), trans(true, false));
    acc = acc < 0 ? p : b.node("add_" + std::to_string(t), "aten.add.Tensor", {acc, p}, F({5, 2}), {{"alpha", 1}});
  }
  b.output(b.node("add_4", "aten.add.Tensor", {acc, bias}, F({5, 2}), {{"alpha", 1}}));
  Function before = b.done(), f = before;
  ts::merge_summed_products(f);
  std::vector<std::string> want = {
      R"(%add_4.merged.a = aten.cat.default(%g0, %g1, %g2, %g3, {"dim":0}))",
      R"(%add_4.merged.b = aten.cat.default(%h0, %h1, %h2, %h3, {"dim":0}))",
      R"(%add_4.merged = trainstep.matmul(%add_4.merged.a, %add_4.merged.b, {"trans_a":true,"trans_b":false}))",
      R"(%add_4 = aten.add.Tensor(%add_4.merged, %bias, {"alpha":1}))",
  };
  EXPECT_EQ(dump(f), want);
  EXPECT_EQ(f.value_types[f.nodes[0].outputs[0]].shape, (ts::Shape{12, 5}));
  expect_same_outputs(before, f, 4);
}

// Plain mm leaves join along a's dim 1 and b's dim 0, b^T leaves along
// dim 1 of both. Only the largest group of one kind merges; a product that
// is also read elsewhere, and a sum read elsewhere, stay as they are.
TEST(MergeSummedProducts, GroupsByTranspositionAndKeepsSharedValues) {
  Builder b;
  int a0 = b.input("a0", F({4, 3})), a1 = b.input("a1", F({4, 2})), a2 = b.input("a2", F({4, 6}));
  int b0 = b.input("b0", F({3, 5})), b1 = b.input("b1", F({2, 5})), b2 = b.input("b2", F({6, 5}));
  int c0 = b.input("c0", F({5, 3}));
  int p0 = b.node("mm", "aten.mm.default", {a0, b0}, F({4, 5}));
  int p1 = b.node("mm_1", "aten.mm.default", {a1, b1}, F({4, 5}));
  int p2 = b.node("mm_2", "aten.mm.default", {a2, b2}, F({4, 5}));
  int q0 = b.node("mm_3", "trainstep.matmul", {a0, c0}, F({4, 5}), trans(false, true));
  int s0 = b.node("add", "aten.add.Tensor", {p0, p1}, F({4, 5}), {{"alpha", 1}});
  int s1 = b.node("add_1", "aten.add.Tensor", {s0, q0}, F({4, 5}), {{"alpha", 1}});
  int s2 = b.node("add_2", "aten.add.Tensor", {s1, p2}, F({4, 5}), {{"alpha", 1}});
  b.output(s2);
  Function before = b.done(), f = before;
  ts::merge_summed_products(f);
  std::vector<std::string> want = {
      R"(%mm_3 = trainstep.matmul(%a0, %c0, {"trans_a":false,"trans_b":true}))",
      R"(%add_2.merged.a = aten.cat.default(%a0, %a1, %a2, {"dim":1}))",
      R"(%add_2.merged.b = aten.cat.default(%b0, %b1, %b2, {"dim":0}))",
      R"(%add_2.merged = trainstep.matmul(%add_2.merged.a, %add_2.merged.b, {"trans_a":false,"trans_b":false}))",
      R"(%add_2 = aten.add.Tensor(%add_2.merged, %mm_3, {"alpha":1}))",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 5);

  // mm_1 also an output, the inner sum read by a second sum: nothing merges
  // (each tree has one mergeable product).
  Builder k;
  int x0 = k.input("x0", F({4, 3})), x1 = k.input("x1", F({4, 3})), y = k.input("y", F({3, 5}));
  int e = k.input("e", F({4, 5}));
  int m0 = k.node("mm", "aten.mm.default", {x0, y}, F({4, 5}));
  int m1 = k.node("mm_1", "aten.mm.default", {x1, y}, F({4, 5}));
  int t0 = k.node("add", "aten.add.Tensor", {m0, e}, F({4, 5}), {{"alpha", 1}});
  int t1 = k.node("add_1", "aten.add.Tensor", {t0, m1}, F({4, 5}), {{"alpha", 1}});
  int t2 = k.node("add_2", "aten.add.Tensor", {t0, e}, F({4, 5}), {{"alpha", 1}});
  for (int v : {t1, t2, m1}) k.output(v);
  Function g = k.done();
  auto same = dump(g);
  ts::merge_summed_products(g);
  EXPECT_EQ(dump(g), same);
}

// alpha != 1 and broadcasting sums are not plain sums: left alone.
TEST(MergeSummedProducts, ScaledOrBroadcastSumsStay) {
  Builder b;
  int x = b.input("x", F({4, 3})), y = b.input("y", F({3, 5})), r = b.input("r", F({1, 5}));
  int m0 = b.node("mm", "aten.mm.default", {x, y}, F({4, 5}));
  int m1 = b.node("mm_1", "aten.mm.default", {x, y}, F({4, 5}));
  int m2 = b.node("mm_2", "aten.mm.default", {x, y}, F({4, 5}));
  int s = b.node("add", "aten.add.Tensor", {m0, m1}, F({4, 5}), {{"alpha", 2}});
  b.output(s);
  b.output(b.node("add_1", "aten.add.Tensor", {m2, r}, F({4, 5}), {{"alpha", 1}}));
  Function f = b.done();
  auto same = dump(f);
  ts::merge_summed_products(f);
  EXPECT_EQ(dump(f), same);
}

// A transformer's head split and merge as traced: the copies of each chain
// become one as_strided of the chain's first input; a copy another node
// also reads stays (as a gather from the root), and an expand to the same
// shape goes.
TEST(ComposeViews, ChainsOfCopiesBecomeOneGather) {
  Builder b;
  int qkv = b.input("qkv", F({2, 8, 24}));
  int q = b.node("as_strided", "aten.as_strided.default", {qkv}, F({2, 8, 8}),
                 {{"size", {2, 8, 8}}, {"stride", {192, 24, 1}}, {"storage_offset", 8}});
  int v = b.node("view", "aten.view.default", {q}, F({2, 8, 2, 4}), {{"size", {2, 8, 2, 4}}});
  int t = b.node("transpose", "aten.transpose.int", {v}, F({2, 2, 8, 4}), {{"dim0", 1}, {"dim1", 2}});
  int e = b.node("expand", "aten.expand.default", {t}, F({2, 2, 8, 4}), {{"size", {2, 2, 8, 4}}});
  int c = b.node("clone", "aten.clone.default", {e}, F({2, 2, 8, 4}));
  int n = b.node("neg", "aten.neg.default", {t}, F({2, 2, 8, 4}));  // the transpose's other reader
  int m = b.node("transpose_1", "aten.transpose.int", {c}, F({2, 8, 2, 4}), {{"dim0", 1}, {"dim1", 2}});
  int mc = b.node("clone_1", "aten.clone.default", {m}, F({2, 8, 2, 4}));
  int same = b.node("expand_1", "aten.expand.default", {qkv}, F({2, 8, 24}), {{"size", {2, 8, 24}}});
  int n1 = b.node("neg_1", "aten.neg.default", {same}, F({2, 8, 24}));
  b.output(mc);
  b.output(n);
  b.output(n1);
  Function before = b.done(), f = before;
  ts::compose_views(f);
  std::vector<std::string> want = {
      R"(%transpose = aten.as_strided.default(%qkv, {"size":[2,2,8,4],"storage_offset":8,"stride":[192,4,24,1]}))",
      "%neg = aten.neg.default(%transpose)",
      R"(%clone_1 = aten.as_strided.default(%qkv, {"size":[2,8,2,4],"storage_offset":8,"stride":[192,24,4,1]}))",
      "%neg_1 = aten.neg.default(%qkv)",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 3);
}

// A copy of a reshape of a value (what the capture's copy of a bias
// gradient, a sum then a view, traces to) is the value's own elements in
// order: a view of it, no copy.
TEST(ComposeViews, ACopyOfAReshapeIsAView) {
  Builder b;
  int x = b.input("x", F({3, 5}));
  int s = b.node("sum", "aten.sum.dim_IntList", {x}, F({1, 5}),
                 {{"dim", {0}}, {"dtype", nullptr}, {"keepdim", true}});
  int v = b.node("view", "aten.view.default", {s}, F({5}), {{"size", {5}}});
  int c = b.node("clone", "aten.clone.default", {v}, F({5}));
  b.output(b.node("neg", "aten.neg.default", {c}, F({5})));
  Function before = b.done(), f = before;
  ts::compose_views(f);
  std::vector<std::string> want = {
      R"(%sum = aten.sum.dim_IntList(%x, {"dim":[0],"dtype":null,"keepdim":true}))",
      R"(%clone = aten.view.default(%sum, {"size":[5]}))",
      "%neg = aten.neg.default(%clone)",
  };
  EXPECT_EQ(dump(f), want);
  expect_same_outputs(before, f, 1);
}

// The pipeline asks the device's Target, not which device it is: each field
// turns its pass on or off, whatever the device.
TEST(Target, FieldsChooseThePasses) {
  Builder b;
  int x = b.input("x", F({2, 3, 8, 8})), w = b.input("w", F({4, 3, 3, 3}));
  int cv = b.node("convolution", "aten.convolution.default", {x, w, -1}, F({2, 4, 6, 6}), conv_attrs());
  b.output(b.node("relu", "aten.relu.default", {cv}, F({2, 4, 6, 6})));
  const Function base = b.done();
  auto ops = [](const Function& f) {
    std::string s;
    for (const ts::Node& n : f.nodes)
      if (!n.dead) s += n.op + ";";
    return s;
  };
  ts::CompileOptions o;
  for (ts::Device d : {ts::Device::Cpu, ts::Device::Cuda})
    for (bool fuse : {false, true}) {
      ts::Target t = ts::target_of(d);
      t.relu_fusion = fuse;
      t.blocked_layouts = false;  // plan_layouts' choice depends on the CPU's ISA
      Function f = base;
      ts::optimize(f, o, t);
      EXPECT_EQ(ops(f), fuse ? "trainstep.conv2d_relu;" : "aten.convolution.default;aten.relu.default;")
          << ts::device_name(d);
    }
  // The CPU's own target fuses; CUDA's takes the unfused ops.
  Function cpu = base, cuda = base;
  ts::optimize(cpu, o, ts::Device::Cpu);
  ts::optimize(cuda, o, ts::Device::Cuda);
  EXPECT_EQ(ops(cpu), "trainstep.conv2d_relu;");
  EXPECT_EQ(ops(cuda), "aten.convolution.default;aten.relu.default;");
}

// Every refusal of a missing capability names the devices that have it.
TEST(Target, RefusalsNameTheDevicesThatCan) {
  EXPECT_EQ(ts::devices_with(&ts::Target::grad_steps), "cpu");
  EXPECT_EQ(ts::runs_only_on("x", &ts::Target::data_parallel), "x runs on --device cpu only");
  ts::SessionOptions o;
  o.on_nonfinite = ts::NonFinite::Skip;
  ts::check_supported(o, ts::target_of(ts::Device::Cpu), "a.tstep");
  try {
    ts::check_supported(o, ts::target_of(ts::Device::Cuda), "a.tstep");
    FAIL() << "CUDA ran --on-nonfinite skip";
  } catch (const ts::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "a.tstep: --on-nonfinite skip runs on --device cpu only (use stop or off)");
  }
}

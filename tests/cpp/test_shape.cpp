#include "elem_test_util.h"

using namespace elemtest;

namespace {
std::vector<double> iota(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}
}  // namespace

TEST(Shape, AliasingReshapes) {
  Arg a = tensor(DType::F32, {2, 3, 4}, iota(24));
  auto v = run("aten.view.default", {{"size", {4, -1}}}, {a});
  EXPECT_EQ(v[0].tensor().shape, (Shape{4, 6}));
  EXPECT_EQ(v[0].tensor().data, a.tensor().data);
  EXPECT_EQ(run("aten._unsafe_view.default", {{"size", {24}}}, {a})[0].tensor().shape, (Shape{24}));
  EXPECT_EQ(run("aten.reshape.default", {{"shape", {-1, 2}}}, {a})[0].tensor().shape, (Shape{12, 2}));
  EXPECT_EQ(run("aten.unsqueeze.default", {{"dim", -1}}, {a})[0].tensor().shape, (Shape{2, 3, 4, 1}));
  EXPECT_EQ(run("aten.unsqueeze.default", {{"dim", 0}}, {a})[0].tensor().shape, (Shape{1, 2, 3, 4}));
  Arg b = tensor(DType::I64, {1, 3, 1}, {1, 2, 3});
  EXPECT_EQ(run("aten.squeeze.dim", {{"dim", 0}}, {b})[0].tensor().shape, (Shape{3, 1}));
  EXPECT_EQ(run("aten.squeeze.dim", {{"dim", 1}}, {b})[0].tensor().shape, (Shape{1, 3, 1}));
  EXPECT_EQ(run("aten.squeeze.default", {}, {b})[0].tensor().shape, (Shape{3}));
  EXPECT_TRUE(ts::OpRegistry::get().find("aten.view.default")->alias_input0);
  expect_error([&] { infer("aten.view.default", {{"size", {5, 5}}}, {a}); },
               "node 'n1' (aten.view.default): shape [5, 5] is invalid for input of size 24");
  expect_error([&] { infer("aten.view.default", {{"size", {-1, -1}}}, {a}); }, "only one dimension");
  expect_error([&] { infer("aten.unsqueeze.default", {{"dim", 4}}, {a}); }, "dim 4 is out of range");
}

TEST(Shape, TransposeAndPermute) {
  for (Shape s : {Shape{3, 5}, Shape{70, 45}, Shape{1, 9}, Shape{300, 200}}) {
    for (DType dt : {DType::F32, DType::F64, DType::Bool}) {
      std::mt19937 rng(1);
      Arg a = random(dt, s, rng);
      auto t = run("aten.t.default", {}, {a});
      EXPECT_EQ(t[0].tensor().shape, (Shape{s[1], s[0]}));
      auto av = values(a), tv = values(t[0]);
      for (int64_t i = 0; i < s[0]; ++i)
        for (int64_t j = 0; j < s[1]; ++j) ASSERT_EQ(tv[j * s[0] + i], av[i * s[1] + j]);
    }
  }
  expect_close(run("aten.t.default", {}, {tensor(DType::F32, {3}, {1, 2, 3})})[0], {1, 2, 3}, 0);
  Arg a = tensor(DType::I64, {2, 3, 4}, iota(24));
  const std::vector<std::vector<int64_t>> perms = {{0, 2, 1}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}, {0, 1, 2}, {-1, 0, 1}};
  for (const auto& p : perms) {
    auto o = run("aten.permute.default", {{"dims", p}}, {a});
    Shape s = a.tensor().shape, os = o[0].tensor().shape;
    std::vector<int64_t> pw(3);
    for (int k = 0; k < 3; ++k) pw[k] = p[k] < 0 ? p[k] + 3 : p[k];
    for (int k = 0; k < 3; ++k) ASSERT_EQ(os[k], s[pw[k]]);
    auto ov = values(o[0]);
    for (int64_t i = 0; i < 24; ++i) {
      int64_t oi[3] = {i / (os[1] * os[2]), (i / os[2]) % os[1], i % os[2]};
      int64_t ii[3];
      for (int k = 0; k < 3; ++k) ii[pw[k]] = oi[k];
      ASSERT_EQ(ov[i], (ii[0] * 3 + ii[1]) * 4 + ii[2]);
    }
  }
  auto tr = run("aten.transpose.int", {{"dim0", -1}, {"dim1", 0}}, {a});
  EXPECT_EQ(tr[0].tensor().shape, (Shape{4, 3, 2}));
  EXPECT_EQ(tr[0].data<int64_t>()[1], 12);
  expect_error([&] { infer("aten.t.default", {}, {a}); }, "rank <= 2");
  expect_error([&] { infer("aten.permute.default", {{"dims", {0, 0, 1}}}, {a}); }, "repeat");
}

TEST(Shape, Expand) {
  Arg a = tensor(DType::F32, {3, 1}, {1, 2, 3});
  auto e = run("aten.expand.default", {{"size", {2, 3, 4}}}, {a});
  EXPECT_EQ(e[0].tensor().shape, (Shape{2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i) ASSERT_EQ(e[0].data<float>()[i], 1 + (i / 4) % 3);
  auto k = run("aten.expand.default", {{"size", {-1, 2}}}, {a});
  expect_close(k[0], {1, 1, 2, 2, 3, 3}, 0);
  auto s = run("aten.expand.default", {{"size", {4}}}, {tensor(DType::I64, {}, {9})});
  expect_close(s[0], {9, 9, 9, 9}, 0);
  expect_error([&] { infer("aten.expand.default", {{"size", {2, 2}}}, {a}); }, "cannot expand float32[3, 1]");
}

TEST(Shape, Cat) {
  Arg a = tensor(DType::F32, {2, 2}, {1, 2, 3, 4}), b = tensor(DType::F32, {2, 1}, {5, 6});
  auto c = run("aten.cat.default", {{"dim", 1}}, {a, b});
  EXPECT_EQ(c[0].tensor().shape, (Shape{2, 3}));
  expect_close(c[0], {1, 2, 5, 3, 4, 6}, 0);
  auto r = run("aten.cat.default", {{"dim", 0}}, {a, tensor(DType::F32, {0}, {}), a});
  expect_close(r[0], {1, 2, 3, 4, 1, 2, 3, 4}, 0);
  auto m = run("aten.cat.default", {{"dim", -1}}, {a, tensor(DType::I64, {2, 1}, {7, 8})});
  EXPECT_EQ(m[0].tensor().dtype, DType::F32);
  expect_close(m[0], {1, 2, 7, 3, 4, 8}, 0);
  expect_error([&] { infer("aten.cat.default", {{"dim", 0}}, {a, b}); }, "differ outside dim 0");
}

TEST(Shape, SliceAndSelect) {
  Arg a = tensor(DType::I64, {4, 5}, iota(20));
  auto s = run("aten.slice.Tensor", {{"dim", 1}, {"start", 1}, {"end", 9223372036854775807LL}, {"step", 2}}, {a});
  EXPECT_EQ(s[0].tensor().shape, (Shape{4, 2}));
  expect_close(s[0], {1, 3, 6, 8, 11, 13, 16, 18}, 0);
  auto n = run("aten.slice.Tensor", {{"dim", 0}, {"start", -2}, {"end", nullptr}, {"step", 1}}, {a});
  EXPECT_EQ(n[0].tensor().shape, (Shape{2, 5}));
  EXPECT_EQ(n[0].data<int64_t>()[0], 10);
  auto e = run("aten.slice.Tensor", {{"dim", 0}, {"start", 3}, {"end", 1}}, {a});
  EXPECT_EQ(e[0].tensor().shape, (Shape{0, 5}));
  auto sel = run("aten.select.int", {{"dim", 1}, {"index", -1}}, {a});
  EXPECT_EQ(sel[0].tensor().shape, (Shape{4}));
  expect_close(sel[0], {4, 9, 14, 19}, 0);
  expect_close(run("aten.select.int", {{"dim", 0}, {"index", 2}}, {a})[0], {10, 11, 12, 13, 14}, 0);
  expect_error([&] { infer("aten.select.int", {{"dim", 0}, {"index", 4}}, {a}); }, "index 4 is out of range");
  expect_error([&] { infer("aten.slice.Tensor", {{"dim", 3}}, {a}); }, "dim 3 is out of range");
}

TEST(Shape, AsStrided) {
  // functionalize's form of split(): three column blocks of a [2, 6] tensor.
  Arg a = tensor(DType::F32, {2, 6}, iota(12));
  for (int k = 0; k < 3; ++k) {
    auto o = run("aten.as_strided.default", {{"size", {2, 2}}, {"stride", {6, 1}}, {"storage_offset", 2 * k}}, {a});
    EXPECT_EQ(o[0].tensor().shape, (Shape{2, 2}));
    expect_close(o[0], {2.0 * k, 2.0 * k + 1, 6 + 2.0 * k, 7 + 2.0 * k}, 0);
  }
  // A transposing, overlapping view of int64 data.
  Arg b = tensor(DType::I64, {5}, iota(5));
  expect_close(run("aten.as_strided.default", {{"size", {3, 2}}, {"stride", {1, 1}}, {"storage_offset", 1}}, {b})[0],
               {1, 2, 2, 3, 3, 4}, 0);
  expect_error([&] { infer("aten.as_strided.default", {{"size", {2, 2}}, {"stride", {6, 1}}, {"storage_offset", 5}}, {a}); },
               "reads element 12 of float32[2, 6]");
  expect_error([&] { infer("aten.as_strided.default", {{"size", {2}}, {"stride", {6, 1}}, {"storage_offset", 0}}, {a}); },
               "differ in rank");
}

TEST(Shape, Stack) {
  Arg a = tensor(DType::F32, {2, 2}, {1, 2, 3, 4}), b = tensor(DType::F32, {2, 2}, {5, 6, 7, 8});
  auto s0 = run("aten.stack.default", {{"dim", 0}}, {a, b});
  EXPECT_EQ(s0[0].tensor().shape, (Shape{2, 2, 2}));
  expect_close(s0[0], {1, 2, 3, 4, 5, 6, 7, 8}, 0);
  auto s1 = run("aten.stack.default", {{"dim", 1}}, {a, b});
  expect_close(s1[0], {1, 2, 5, 6, 3, 4, 7, 8}, 0);
  auto s2 = run("aten.stack.default", {{"dim", -1}}, {a, b, a});
  EXPECT_EQ(s2[0].tensor().shape, (Shape{2, 2, 3}));
  expect_close(s2[0], {1, 5, 1, 2, 6, 2, 3, 7, 3, 4, 8, 4}, 0);
  expect_error([&] { infer("aten.stack.default", {{"dim", 0}}, {a, tensor(DType::F32, {4}, {1, 2, 3, 4})}); },
               "differ in shape");
}

TEST(Shape, UnbindAndUnsafeSplit) {
  Arg a = tensor(DType::I64, {3, 5}, iota(15));
  auto u = run("aten.unbind.int", {{"dim", 1}}, {a});
  ASSERT_EQ(u.size(), 5u);
  EXPECT_EQ(u[2].tensor().shape, (Shape{3}));
  expect_close(u[2], {2, 7, 12}, 0);
  auto u0 = run("aten.unbind.int", {{"dim", 0}}, {a});
  ASSERT_EQ(u0.size(), 3u);
  expect_close(u0[1], {5, 6, 7, 8, 9}, 0);
  auto sp = run("aten.unsafe_split.Tensor", {{"split_size", 2}, {"dim", 1}}, {a});
  ASSERT_EQ(sp.size(), 3u);
  EXPECT_EQ(sp[2].tensor().shape, (Shape{3, 1}));
  expect_close(sp[0], {0, 1, 5, 6, 10, 11}, 0);
  expect_close(sp[1], {2, 3, 7, 8, 12, 13}, 0);
  expect_close(sp[2], {4, 9, 14}, 0);
  // An LSTM's gate split: [B, 4H] into four [B, H].
  Arg g = tensor(DType::F32, {2, 8}, iota(16));
  auto gates = run("aten.unsafe_split.Tensor", {{"split_size", 2}, {"dim", 1}}, {g});
  ASSERT_EQ(gates.size(), 4u);
  expect_close(gates[3], {6, 7, 14, 15}, 0);
  // Unused outputs (nullptr) are skipped.
  std::vector<ts::Tensor> in = {a.tensor()};
  HostTensor o0(DType::I64, {3, 2});
  std::vector<ts::Tensor> out = {o0.view, ts::Tensor{}, ts::Tensor{}};
  json attrs = {{"split_size", 2}, {"dim", 1}};
  auto ctx = node_ctx("aten.unsafe_split.Tensor", attrs, {a});
  auto types = op_def("aten.unsafe_split.Tensor").infer(ctx);
  ts::KernelCtx kc{ctx, types, 1};
  op_def("aten.unsafe_split.Tensor").make(kc)->run(in.data(), out.data());
  EXPECT_EQ(o0.view.as<int64_t>()[3], 6);
  expect_error([&] { infer("aten.unsafe_split.Tensor", {{"split_size", 0}, {"dim", 1}}, {a}); },
               "split_size must be positive");
  expect_error([&] { infer("aten.unbind.int", {{"dim", 0}}, {tensor(DType::F32, {}, {1})}); }, "0-d");
}

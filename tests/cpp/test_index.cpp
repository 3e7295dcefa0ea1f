#include "elem_test_util.h"

using namespace elemtest;

TEST(Index, GatherLastDim) {
  Arg self = tensor(DType::F32, {3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  Arg idx = tensor(DType::I64, {3, 1}, {2, 0, 3});
  auto o = run("aten.gather.default", {{"dim", 1}, {"sparse_grad", false}}, {self, idx});
  EXPECT_EQ(o[0].tensor().shape, (Shape{3, 1}));
  expect_close(o[0], {2, 10, 23}, 0);
  // dim 0, index smaller than self outside dim (general path).
  Arg idx0 = tensor(DType::I64, {2, 2}, {2, 1, 0, 2});
  expect_close(run("aten.gather.default", {{"dim", 0}}, {self, idx0})[0], {20, 11, 0, 21}, 0);
  // int64 data, index with the full shape.
  Arg si = tensor(DType::I64, {2, 3}, {5, 6, 7, 8, 9, 10});
  Arg full = tensor(DType::I64, {2, 3}, {1, 0, 1, 0, 1, 0});
  expect_close(run("aten.gather.default", {{"dim", 0}}, {si, full})[0], {8, 6, 10, 5, 9, 7}, 0);
}

TEST(Index, GatherRandomMatchesReference) {
  std::mt19937 rng(4);
  Arg self = random(DType::F64, {6, 5, 7}, rng);
  for (int dim = 0; dim < 3; ++dim) {
    Shape is = {4, 3, 5};
    Arg idx = tensor(DType::I64, is, std::vector<double>(60, 0));
    std::uniform_int_distribution<int> u(0, static_cast<int>(self.tensor().shape[dim]) - 1);
    for (int i = 0; i < 60; ++i) idx.data<int64_t>()[i] = u(rng);
    auto o = run("aten.gather.default", {{"dim", dim}}, {self, idx});
    for (int i = 0; i < 60; ++i) {
      int64_t m[3] = {i / 15, (i / 5) % 3, i % 5};
      m[dim] = idx.data<int64_t>()[i];
      ASSERT_EQ(o[0].data<double>()[i], self.data<double>()[(m[0] * 5 + m[1]) * 7 + m[2]]);
    }
  }
}

TEST(Index, Scatter) {
  Arg self = tensor(DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0});
  Arg idx = tensor(DType::I64, {2, 2}, {2, 0, 1, 1});
  Arg src = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_close(run("aten.scatter.src", {{"dim", 1}}, {self, idx, src})[0], {2, 0, 1, 0, 5, 0}, 0);
  expect_close(run("aten.scatter_add.default", {{"dim", 1}}, {self, idx, src})[0], {2, 0, 1, 0, 9, 0}, 0);
  expect_close(run("aten.scatter.value", {{"dim", 1}, {"value", 7.5}}, {self, idx})[0], {7.5, 0, 7.5, 0, 7.5, 0}, 0);
  // dim 0 on int64; scatter_add accumulates duplicates.
  Arg si = tensor(DType::I64, {3}, {1, 1, 1});
  Arg ii = tensor(DType::I64, {4}, {0, 2, 2, 2});
  Arg sr = tensor(DType::I64, {4}, {10, 20, 30, 40});
  expect_close(run("aten.scatter_add.default", {{"dim", 0}}, {si, ii, sr})[0], {11, 1, 91}, 0);
}

TEST(Index, IndexSelect) {
  Arg self = tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Arg idx = tensor(DType::I64, {4}, {2, 0, 2, 1});
  auto o = run("aten.index_select.default", {{"dim", 0}}, {self, idx});
  EXPECT_EQ(o[0].tensor().shape, (Shape{4, 2}));
  expect_close(o[0], {5, 6, 1, 2, 5, 6, 3, 4}, 0);
  auto c = run("aten.index_select.default", {{"dim", -1}}, {self, tensor(DType::I64, {1}, {1})});
  expect_close(c[0], {2, 4, 6}, 0);
}

TEST(Index, Errors) {
  Arg self = tensor(DType::F32, {3, 4}, std::vector<double>(12, 0));
  Arg bad = tensor(DType::I64, {3, 1}, {0, 7, 1});
  expect_error([&] { run("aten.gather.default", {{"dim", 1}}, {self, bad}); },
               "node 'n1' (aten.gather.default): index 7 is out of bounds for dimension 1 with size 4");
  expect_error([&] { run("aten.index_select.default", {{"dim", 0}}, {self, tensor(DType::I64, {1}, {-1})}); },
               "index -1 is out of bounds");
  expect_error([&] { run("aten.scatter.value", {{"dim", 0}, {"value", 1}}, {self, tensor(DType::I64, {1, 1}, {3})}); },
               "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { infer("aten.gather.default", {{"dim", 1}}, {self, tensor(DType::F32, {3, 1}, {0, 0, 0})}); },
               "must be int64");
  expect_error([&] { infer("aten.gather.default", {{"dim", 2}}, {self, bad}); }, "dim 2 is out of range");
  expect_error([&] { infer("aten.gather.default", {{"dim", 1}}, {self, tensor(DType::I64, {4, 1}, {0, 0, 0, 0})}); },
               "larger than self");
}

TEST(Index, IndexPutAccumulatesDuplicateRows) {
  // embedding backward: grad_weight = zeros.index_put_([ids], grad, accumulate=True)
  Arg self = tensor(DType::F32, {3, 2}, {1, 1, 1, 1, 1, 1});
  Arg idx = tensor(DType::I64, {2, 2}, {2, 0, 2, -3});
  Arg val = tensor(DType::F32, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto o = run("aten.index_put.default", {{"accumulate", true}}, {self, idx, val});
  EXPECT_EQ(o[0].tensor().shape, (Shape{3, 2}));
  // row 0 gets [3,4] and [7,8] (-3 is row 0); row 2 gets [1,2] and [5,6].
  expect_close(o[0], {11, 13, 1, 1, 7, 9}, 0);
  auto p = run("aten.index_put.default", {{"accumulate", false}},
               {self, tensor(DType::I64, {1}, {1}), tensor(DType::F32, {1, 2}, {5, 6})});
  expect_close(p[0], {1, 1, 5, 6, 1, 1}, 0);
}

TEST(Index, IndexPutChecksItsInputs) {
  Arg self = tensor(DType::F32, {3, 2}, {0, 0, 0, 0, 0, 0});
  expect_error([&] {
    run("aten.index_put.default", {{"accumulate", true}},
        {self, tensor(DType::I64, {1}, {0}), tensor(DType::F32, {2, 2}, {0, 0, 0, 0})});
  }, "must be index shape + self's trailing dims float32[1, 2]");
  expect_error([&] {
    run("aten.index_put.default", {{"accumulate", true}},
        {self, tensor(DType::I64, {1}, {3}), tensor(DType::F32, {1, 2}, {0, 0})});
  }, "index 3 is out of bounds for dimension 0 with size 3");
}

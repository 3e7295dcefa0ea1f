#include <cmath>

#include "elem_test_util.h"

using namespace elemtest;

TEST(Creation, Constant) {
  auto c = run("trainstep.constant", {{"value", 2.5}, {"dtype", "float32"}, {"wrapped", false}}, {});
  EXPECT_EQ(c[0].tensor().shape, Shape{});
  expect_close(c[0], {2.5}, 0);
  auto w = infer("trainstep.constant", {{"value", 0.5}, {"dtype", nullptr}, {"wrapped", true}}, {});
  EXPECT_TRUE(w[0].wrapped);
  EXPECT_EQ(w[0].dtype, DType::F64);
  EXPECT_EQ(infer("trainstep.constant", {{"value", 3}, {"dtype", nullptr}}, {})[0].dtype, DType::I64);
  EXPECT_EQ(infer("trainstep.constant", {{"value", true}}, {})[0].dtype, DType::Bool);
  auto inf = run("trainstep.constant", {{"value", "-inf"}, {"dtype", "float32"}}, {});
  EXPECT_TRUE(std::isinf(inf[0].data<float>()[0]) && inf[0].data<float>()[0] < 0);
  auto nan = run("trainstep.constant", {{"value", "nan"}, {"dtype", "float64"}}, {});
  EXPECT_TRUE(std::isnan(nan[0].data<double>()[0]));
  auto big = run("trainstep.constant", {{"value", 9007199254740993LL}, {"dtype", "int64"}}, {});
  EXPECT_EQ(big[0].data<int64_t>()[0], 9007199254740993LL);
  expect_close(run("aten.scalar_tensor.default", {{"s", 4}}, {})[0], {4}, 0);
  EXPECT_EQ(infer("aten.scalar_tensor.default", {{"s", 4}}, {})[0].dtype, DType::F32);
}

TEST(Creation, FullVariants) {
  Arg self = tensor(DType::F64, {2, 3}, std::vector<double>(6, 0));
  auto nf = run("aten.new_full.default", {{"size", {3}}, {"fill_value", 1.5}, {"dtype", nullptr}}, {self});
  EXPECT_EQ(nf[0].tensor().dtype, DType::F64);
  expect_close(nf[0], {1.5, 1.5, 1.5}, 0);
  expect_close(run("aten.new_zeros.default", {{"size", {2}}}, {self})[0], {0, 0}, 0);
  auto no = run("aten.new_ones.default", {{"size", {2, 2}}, {"dtype", "int64"}}, {self});
  EXPECT_EQ(no[0].tensor().dtype, DType::I64);
  expect_close(no[0], {1, 1, 1, 1}, 0);
  EXPECT_EQ(infer("aten.full.default", {{"size", {2}}, {"fill_value", 1.0}}, {})[0].dtype, DType::F32);
  EXPECT_EQ(infer("aten.full.default", {{"size", {2}}, {"fill_value", 1}}, {})[0].dtype, DType::I64);
  EXPECT_EQ(infer("aten.full.default", {{"size", {2}}, {"fill_value", false}}, {})[0].dtype, DType::Bool);
  expect_close(run("aten.full.default", {{"size", {2, 2}}, {"fill_value", -3}, {"dtype", "float32"}}, {})[0],
               {-3, -3, -3, -3}, 0);
  auto fl = run("aten.full_like.default", {{"fill_value", 7}}, {self});
  EXPECT_EQ(fl[0].tensor().shape, (Shape{2, 3}));
  expect_close(fl[0], std::vector<double>(6, 7), 0);
  auto z = run("aten.zeros_like.default", {{"dtype", "bool"}}, {self});
  EXPECT_EQ(z[0].tensor().dtype, DType::Bool);
  expect_close(run("aten.ones_like.default", {}, {self})[0], std::vector<double>(6, 1), 0);
  // Big fills run in parallel.
  auto bigf = run("aten.full.default", {{"size", {500, 300}}, {"fill_value", 0.25}}, {});
  for (int64_t i = 0; i < 150000; ++i) ASSERT_EQ(bigf[0].data<float>()[i], 0.25f);
  expect_error([&] { infer("aten.full.default", {{"size", {-1}}, {"fill_value", 1}}, {}); }, "negative size");
  auto zs = run("aten.zeros.default", {{"size", {2, 3}}, {"dtype", nullptr}}, {});
  EXPECT_EQ(zs[0].tensor().dtype, DType::F32);
  expect_close(zs[0], std::vector<double>(6, 0), 0);
  EXPECT_EQ(infer("aten.zeros.default", {{"size", {4}}, {"dtype", "int64"}}, {})[0].dtype, DType::I64);
}

TEST(Creation, Arange) {
  auto a = run("aten.arange.default", {{"end", 5}}, {});
  EXPECT_EQ(a[0].tensor().dtype, DType::I64);
  expect_close(a[0], {0, 1, 2, 3, 4}, 0);
  auto f = run("aten.arange.start_step", {{"start", 0}, {"end", 1}, {"step", 0.25}}, {});
  EXPECT_EQ(f[0].tensor().dtype, DType::F32);
  expect_close(f[0], {0, 0.25, 0.5, 0.75}, 0);
  auto d = run("aten.arange.start_step", {{"start", 5}, {"end", 0}, {"step", -2}, {"dtype", "float64"}}, {});
  expect_close(d[0], {5, 3, 1}, 0);
  expect_error([&] { infer("aten.arange.start_step", {{"start", 0}, {"end", 1}, {"step", 0}}, {}); }, "nonzero");
}

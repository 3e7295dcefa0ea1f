#include <cmath>
#include <limits>

#include "elem_test_util.h"

using namespace elemtest;

namespace {

// Reference reduction over dims `red` (true = reduced) with keepdim=false.
std::vector<double> ref_reduce(const Arg& a, const std::vector<bool>& red, int kind /*0 sum 1 max 2 min*/) {
  const Shape& s = a.tensor().shape;
  Shape os;
  for (size_t d = 0; d < s.size(); ++d)
    if (!red[d]) os.push_back(d < s.size() ? s[d] : 1);
  const int64_t on = ts::shape_numel(os);
  std::vector<double> out(on, kind == 0 ? 0.0 : kind == 1 ? -INFINITY : INFINITY);
  auto v = values(a);
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      const int64_t id = rem % s[d];
      rem /= s[d];
      if (!red[d]) {
        o += id * mul;
        mul *= s[d];
      }
    }
    if (kind == 0) out[o] += v[i];
    else if (kind == 1) out[o] = std::max(out[o], v[i]);
    else out[o] = std::min(out[o], v[i]);
  }
  return out;
}

}  // namespace

TEST(Reduce, SumMeanAmaxAmin) {
  std::mt19937 rng(21);
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{5, 7}, {1}},        {{5, 7}, {0}},        {{5, 7}, {}},         {{4, 5, 6}, {1}},
      {{4, 5, 6}, {0, 2}},  {{4, 5, 6}, {-1, 0}}, {{3, 1, 4}, {1}},     {{}, {}},
      {{2, 3, 4, 5}, {1, 3}}, {{300, 300}, {0}}, {{300, 300}, {1}},    {{200000}, {0}},
      {{2, 100000}, {1}},   {{1000, 130}, {0}}};
  for (const auto& [shape, dims] : cases) {
    std::vector<bool> red(shape.size(), dims.empty());
    for (int64_t d : dims) red[d < 0 ? d + static_cast<int64_t>(shape.size()) : d] = true;
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d)
      if (red[d]) count *= shape[d];
    for (DType dt : {DType::F32, DType::F64, DType::I64}) {
      SCOPED_TRACE(ts::shape_str(shape) + " dims " + ts::shape_str(dims) + " " + ts::dtype_name(dt));
      Arg a = random(dt, shape, rng);
      json attrs = {{"dim", dims}, {"keepdim", false}, {"dtype", nullptr}};
      auto s = run("aten.sum.dim_IntList", attrs, {a});
      EXPECT_EQ(s[0].tensor().dtype, dt);
      expect_close(s[0], ref_reduce(a, red, 0), dt == DType::F32 ? 1e-6 : 1e-12, 1e-5);
      expect_close(run("aten.amax.default", attrs, {a})[0], ref_reduce(a, red, 1), 0);
      expect_close(run("aten.amin.default", attrs, {a})[0], ref_reduce(a, red, 2), 0);
      if (dt != DType::I64) {
        auto want = ref_reduce(a, red, 0);
        for (double& w : want) w /= static_cast<double>(count);
        expect_close(run("aten.mean.dim", attrs, {a})[0], want, dt == DType::F32 ? 1e-6 : 1e-12, 1e-6);
      }
    }
  }
}

TEST(Reduce, KeepdimDtypeAndDefaults) {
  Arg a = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto k = run("aten.sum.dim_IntList", {{"dim", {1}}, {"keepdim", true}}, {a});
  EXPECT_EQ(k[0].tensor().shape, (Shape{2, 1}));
  expect_close(k[0], {6, 15}, 0);
  auto all = run("aten.sum.default", {{"dtype", nullptr}}, {a});
  EXPECT_EQ(all[0].tensor().shape, Shape{});
  expect_close(all[0], {21}, 0);
  auto d = run("aten.sum.default", {{"dtype", "float64"}}, {a});
  EXPECT_EQ(d[0].tensor().dtype, DType::F64);
  auto nulldim = run("aten.sum.dim_IntList", {{"dim", nullptr}, {"keepdim", true}}, {a});
  EXPECT_EQ(nulldim[0].tensor().shape, (Shape{1, 1}));
  expect_close(run("aten.mean.default", {}, {a})[0], {3.5}, 0);
  // bool / int sums give int64.
  Arg b = tensor(DType::Bool, {5}, {1, 0, 1, 1, 0});
  auto bs = run("aten.sum.default", {}, {b});
  EXPECT_EQ(bs[0].tensor().dtype, DType::I64);
  expect_close(bs[0], {3}, 0);
  EXPECT_EQ(infer("aten.sum.default", {}, {tensor(DType::I32, {1}, {1})})[0].dtype, DType::I64);
  // mean of an int tensor needs a dtype.
  Arg i = tensor(DType::I64, {4}, {1, 2, 3, 5});
  expect_error([&] { infer("aten.mean.default", {}, {i}); }, "mean needs a float");
  expect_close(run("aten.mean.default", {{"dtype", "float32"}}, {i})[0], {2.75}, 0);
  // NaN propagates through amax.
  auto m = run("aten.amax.default", {{"dim", {0}}}, {tensor(DType::F32, {3}, {1, NAN, 2})});
  EXPECT_TRUE(std::isnan(m[0].data<float>()[0]));
  expect_error([&] { infer("aten.sum.dim_IntList", {{"dim", {2}}}, {a}); }, "dim 2 is out of range");
}

TEST(Reduce, SumAccuracy) {
  // A long float32 sum stays within 1e-6 relative of the exact sum.
  std::mt19937 rng(9);
  Arg a = random(DType::F32, {1 << 20}, rng, 0, 1);
  double exact = 0;
  for (double v : values(a)) exact += v;
  auto s = run("aten.sum.default", {}, {a});
  EXPECT_NEAR(s[0].data<float>()[0], exact, exact * 1e-7);
}

TEST(Reduce, Argmax) {
  Arg a = tensor(DType::F32, {2, 3}, {1, 5, 5, 7, 2, 7});
  auto o = run("aten.argmax.default", {{"dim", 1}, {"keepdim", false}}, {a});
  EXPECT_EQ(o[0].tensor().dtype, DType::I64);
  expect_close(o[0], {1, 0}, 0);
  expect_close(run("aten.argmax.default", {{"dim", 0}}, {a})[0], {1, 0, 1}, 0);
  auto k = run("aten.argmax.default", {{"dim", -1}, {"keepdim", true}}, {a});
  EXPECT_EQ(k[0].tensor().shape, (Shape{2, 1}));
  auto flat = run("aten.argmax.default", {{"dim", nullptr}}, {a});
  EXPECT_EQ(flat[0].tensor().shape, Shape{});
  expect_close(flat[0], {3}, 0);
  expect_close(run("aten.argmax.default", {{"dim", 0}}, {tensor(DType::F64, {4}, {1, NAN, 9, NAN})})[0], {1}, 0);
  expect_close(run("aten.argmax.default", {{"dim", 0}}, {tensor(DType::I64, {3}, {-5, -1, -3})})[0], {1}, 0);
  // larger, parallel
  std::mt19937 rng(2);
  Arg big = random(DType::F32, {500, 100}, rng);
  auto r = run("aten.argmax.default", {{"dim", 1}}, {big});
  auto v = values(big);
  for (int i = 0; i < 500; ++i) {
    int best = 0;
    for (int j = 1; j < 100; ++j)
      if (v[i * 100 + j] > v[i * 100 + best]) best = j;
    ASSERT_EQ(r[0].data<int64_t>()[i], best);
  }
}

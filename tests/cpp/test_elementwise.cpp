#include <cmath>
#include <functional>

#include "elem_test_util.h"

using namespace elemtest;

namespace {

const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{3, 4}, {3, 4}},       {{3, 4}, {}},          {{}, {3, 4}},     {{3, 4}, {4}},
    {{3, 1}, {1, 4}},       {{2, 3, 4}, {3, 1}},   {{2, 1, 4}, {1, 3, 1}}, {{1}, {5}},
    {{}, {}},               {{5, 1, 7}, {5, 6, 7}}, {{300, 257}, {257}}, {{257, 1}, {257, 300}},
    {{70, 700}, {70, 700}}, {{1, 40000}, {}},
};

using Ref = std::function<double(double, double)>;

void check_binary(const std::string& op, DType dt, const Ref& ref, json attrs = json::object(),
                  double lo = -3, double hi = 3) {
  std::mt19937 rng(1234);
  for (const auto& [sa, sb] : kShapes) {
    Arg a = random(dt, sa, rng, lo, hi), b = random(dt, sb, rng, lo, hi);
    auto out = run(op, attrs, {a, b});
    Shape os = out[0].tensor().shape;
    std::vector<double> want(out[0].numel());
    auto av = values(a), bv = values(b);
    for (int64_t i = 0; i < out[0].numel(); ++i)
      want[i] = ref(av[bcast_index(i, os, sa)], bv[bcast_index(i, os, sb)]);
    SCOPED_TRACE(op + " " + ts::shape_str(sa) + " " + ts::shape_str(sb) + " " + ts::dtype_name(dt));
    expect_close(out[0], want, dt == DType::F32 ? 2e-6 : 1e-12, dt == DType::F32 ? 1e-6 : 0);
  }
}

}  // namespace

TEST(Elementwise, ArithmeticAllDtypes) {
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32}) {
    check_binary("aten.add.Tensor", dt, [](double x, double y) { return x + y; });
    check_binary("aten.sub.Tensor", dt, [](double x, double y) { return x - y; });
    check_binary("aten.mul.Tensor", dt, [](double x, double y) { return x * y; });
    check_binary("aten.maximum.default", dt, [](double x, double y) { return std::max(x, y); });
    check_binary("aten.minimum.default", dt, [](double x, double y) { return std::min(x, y); });
    check_binary("aten.add.Tensor", dt, [](double x, double y) { return x + 2 * y; }, {{"alpha", 2}});
    check_binary("aten.sub.Tensor", dt, [](double x, double y) { return x - 3 * y; }, {{"alpha", 3}});
  }
  for (DType dt : {DType::F32, DType::F64}) {
    check_binary("aten.div.Tensor", dt, [](double x, double y) { return x / y; }, {}, 0.5, 3);
    check_binary("aten.pow.Tensor_Tensor", dt, [](double x, double y) { return std::pow(x, y); }, {}, 0.5, 2);
  }
  check_binary("aten.pow.Tensor_Tensor", DType::I64, [](double x, double y) { return std::pow(x, y); }, {}, 0, 4);
}

TEST(Elementwise, Comparisons) {
  const std::vector<std::pair<std::string, Ref>> ops = {
      {"eq", [](double x, double y) { return double(x == y); }},
      {"ne", [](double x, double y) { return double(x != y); }},
      {"lt", [](double x, double y) { return double(x < y); }},
      {"le", [](double x, double y) { return double(x <= y); }},
      {"gt", [](double x, double y) { return double(x > y); }},
      {"ge", [](double x, double y) { return double(x >= y); }}};
  for (const auto& [name, ref] : ops) {
    for (DType dt : {DType::F32, DType::I64, DType::Bool}) check_binary("aten." + name + ".Tensor", dt, ref);
    std::mt19937 rng(7);
    Arg a = random(DType::I64, {4, 5}, rng);
    auto out = run("aten." + name + ".Scalar", {{"other", 1}}, {a});
    EXPECT_EQ(out[0].tensor().dtype, DType::Bool);
    std::vector<double> want;
    for (double v : values(a)) want.push_back(ref(v, 1));
    expect_close(out[0], want, 0);
    // int tensor vs float scalar compares in float: 1 < 1.5.
    out = run("aten." + name + ".Scalar", {{"other", 1.5}}, {a});
    want.clear();
    for (double v : values(a)) want.push_back(ref(v, 1.5));
    expect_close(out[0], want, 0);
  }
}

TEST(Elementwise, BoolArithmetic) {
  Arg a = tensor(DType::Bool, {4}, {0, 0, 1, 1}), b = tensor(DType::Bool, {4}, {0, 1, 0, 1});
  auto add = run("aten.add.Tensor", {}, {a, b});
  EXPECT_EQ(add[0].tensor().dtype, DType::Bool);
  expect_close(add[0], {0, 1, 1, 1}, 0);
  expect_close(run("aten.mul.Tensor", {}, {a, b})[0], {0, 0, 0, 1}, 0);
  expect_error([&] { infer("aten.sub.Tensor", {}, {a, b}); }, "bool");
}

TEST(Elementwise, Promotion) {
  std::mt19937 rng(3);
  Arg f = random(DType::F32, {3}, rng), i = tensor(DType::I64, {3}, {1, 2, 7});
  Arg wf = tensor(DType::F64, {}, {0.1}, true);
  // f32 tensor * wrapped f64 scalar -> f32, the scalar rounded to float first.
  auto out = run("aten.mul.Tensor", {}, {f, wf});
  EXPECT_EQ(out[0].tensor().dtype, DType::F32);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out[0].data<float>()[k], f.data<float>()[k] * 0.1f);
  // int64 / int64 -> f32 true division.
  out = run("aten.div.Tensor", {}, {i, tensor(DType::I64, {3}, {2, 4, 2})});
  EXPECT_EQ(out[0].tensor().dtype, DType::F32);
  expect_close(out[0], {0.5, 0.5, 3.5}, 0);
  // 0-d f32 vs dimensioned int64 -> f32 (higher category wins).
  out = run("aten.add.Tensor", {}, {i, tensor(DType::F32, {}, {0.5})});
  EXPECT_EQ(out[0].tensor().dtype, DType::F32);
  expect_close(out[0], {1.5, 2.5, 7.5}, 0);
  // 0-d f64 vs dimensioned f32 -> f32 (dimensioned decides within a category).
  EXPECT_EQ(infer("aten.add.Tensor", {}, {f, tensor(DType::F64, {}, {1})})[0].dtype, DType::F32);
  // 0-d f64 vs dimensioned int64 -> f64.
  EXPECT_EQ(infer("aten.add.Tensor", {}, {i, tensor(DType::F64, {}, {1})})[0].dtype, DType::F64);
  // int64 tensor + wrapped float -> default float32.
  EXPECT_EQ(infer("aten.add.Tensor", {}, {i, wf})[0].dtype, DType::F32);
  // int32 tensor + wrapped int64 -> int32; + 0-d int64 -> int32; + [1] int64 -> int64.
  Arg i32 = tensor(DType::I32, {2}, {1, 2});
  EXPECT_EQ(infer("aten.add.Tensor", {}, {i32, tensor(DType::I64, {}, {3}, true)})[0].dtype, DType::I32);
  EXPECT_EQ(infer("aten.add.Tensor", {}, {i32, tensor(DType::I64, {}, {3})})[0].dtype, DType::I32);
  EXPECT_EQ(infer("aten.add.Tensor", {}, {i32, tensor(DType::I64, {1}, {3})})[0].dtype, DType::I64);
  // bool tensor + wrapped int -> int64; f32 + f64 dimensioned -> f64.
  EXPECT_EQ(infer("aten.add.Tensor", {}, {tensor(DType::Bool, {1}, {1}), tensor(DType::I64, {}, {3}, true)})[0].dtype,
            DType::I64);
  EXPECT_EQ(infer("aten.mul.Tensor", {}, {f, tensor(DType::F64, {3}, {1, 2, 3})})[0].dtype, DType::F64);
  // Mixed dimensioned dtypes compute after a cast.
  out = run("aten.sub.Tensor", {}, {i, tensor(DType::F64, {3}, {0.25, 0.5, 1})});
  expect_close(out[0], {0.75, 1.5, 6}, 0);
  // int32 result computed in int64 and cast back.
  out = run("aten.mul.Tensor", {}, {i32, tensor(DType::I32, {2, 1}, {3, 4})});
  EXPECT_EQ(out[0].tensor().dtype, DType::I32);
  expect_close(out[0], {3, 6, 4, 8}, 0);
}

TEST(Elementwise, ScalarVariants) {
  Arg f = tensor(DType::F32, {4}, {1, 2, 3, 4});
  Arg i = tensor(DType::I64, {4}, {1, 2, 3, 4});
  expect_close(run("aten.add.Scalar", {{"other", 2}, {"alpha", 3}}, {f})[0], {7, 8, 9, 10}, 0);
  expect_close(run("aten.sub.Scalar", {{"other", 0.5}}, {f})[0], {0.5, 1.5, 2.5, 3.5}, 0);
  expect_close(run("aten.mul.Scalar", {{"other", -1}}, {i})[0], {-1, -2, -3, -4}, 0);
  auto d = run("aten.div.Scalar", {{"other", 2}}, {i});
  EXPECT_EQ(d[0].tensor().dtype, DType::F32);
  expect_close(d[0], {0.5, 1, 1.5, 2}, 0);
  auto m = run("aten.mul.Scalar", {{"other", 0.5}}, {i});
  EXPECT_EQ(m[0].tensor().dtype, DType::F32);
  EXPECT_EQ(run("aten.add.Scalar", {{"other", 1}}, {i})[0].tensor().dtype, DType::I64);
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 1.7}) {
    std::vector<double> want;
    for (double v : values(f)) want.push_back(std::pow(v, e));
    expect_close(run("aten.pow.Tensor_Scalar", {{"exponent", e}}, {f})[0], want, 1e-6);
  }
  expect_close(run("aten.pow.Tensor_Scalar", {{"exponent", 3}}, {i})[0], {1, 8, 27, 64}, 0);
  EXPECT_EQ(infer("aten.pow.Tensor_Scalar", {{"exponent", 0.5}}, {i})[0].dtype, DType::F32);
  expect_error([&] { infer("aten.pow.Tensor_Scalar", {{"exponent", -1}}, {i}); }, "negative integer powers");
  auto nan = run("aten.mul.Scalar", {{"other", "nan"}}, {f});
  EXPECT_TRUE(std::isnan(nan[0].data<float>()[0]));
}

// float32 gelu cancels in 1 + erf(x/sqrt2) (or 1 + tanh(...)) for x < 0:
// the erf/tanh error of the vector math (glibc's libmvec, up to 4 ULP of
// values near -1, i.e. 4 * 2^-24) is multiplied by |x|/2. Eager PyTorch's
// SLEEF (1 ULP) has the same cancellation. Other ops: 1e-7.
double gelu_atol(const std::string& name, DType dt, double max_abs_x) {
  if (dt != DType::F32 || name != "gelu") return 1e-7;
  return 1e-7 + max_abs_x / 2 * 4 * std::ldexp(1.0, -24);
}

TEST(Elementwise, Unary) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::string, std::function<double(double)>>> ops = {
      {"neg", [](double x) { return -x; }},
      {"exp", [](double x) { return std::exp(x); }},
      {"expm1", [](double x) { return std::expm1(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"relu", [](double x) { return x < 0 ? 0 : x; }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"reciprocal", [](double x) { return 1 / x; }},
      {"sign", [](double x) { return double((0 < x) - (x < 0)); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }}};
  for (const auto& [name, ref] : ops) {
    const bool pos = name == "log" || name == "sqrt" || name == "rsqrt" || name == "reciprocal";
    for (DType dt : {DType::F32, DType::F64}) {
      for (Shape s : {Shape{}, Shape{7}, Shape{300, 200}}) {
        Arg a = random(dt, s, rng, pos ? 0.1 : -4, 4);
        auto out = run("aten." + name + ".default", {}, {a});
        std::vector<double> want;
        for (double v : values(a)) want.push_back(ref(v));
        SCOPED_TRACE(name);
        expect_close(out[0], want, dt == DType::F32 ? 2e-6 : 1e-14, gelu_atol(name, dt, 4));
      }
    }
  }
  // ints: neg/abs/relu/sign keep int64; exp gives float32.
  Arg i = tensor(DType::I64, {4}, {-2, 0, 3, -7});
  expect_close(run("aten.neg.default", {}, {i})[0], {2, 0, -3, 7}, 0);
  expect_close(run("aten.abs.default", {}, {i})[0], {2, 0, 3, 7}, 0);
  expect_close(run("aten.relu.default", {}, {i})[0], {0, 0, 3, 0}, 0);
  expect_close(run("aten.sign.default", {}, {i})[0], {-1, 0, 1, -1}, 0);
  auto e = run("aten.exp.default", {}, {i});
  EXPECT_EQ(e[0].tensor().dtype, DType::F32);
  expect_close(e[0], {std::exp(-2.0), 1, std::exp(3.0), std::exp(-7.0)}, 1e-6);
  auto r = run("aten.relu.default", {}, {tensor(DType::F32, {1}, {NAN})});
  EXPECT_TRUE(std::isnan(r[0].data<float>()[0]));
  expect_error([&] { infer("aten.neg.default", {}, {tensor(DType::Bool, {1}, {1})}); }, "bool");
}

// expm1 keeps full relative precision near 0, where exp(x) - 1 cancels:
// Adam's bias correction 1 - beta2^step = -expm1(step * log(beta2)).
TEST(Elementwise, Expm1NearZero) {
  Arg a = tensor(DType::F32, {3}, {-1.0005e-3, -2.001e-6, 1e-7});
  auto out = run("aten.expm1.default", {}, {a});
  std::vector<double> want;
  for (double v : values(a)) want.push_back(std::expm1(v));
  expect_close(out[0], want, 2.5e-7, 0);
}

TEST(Elementwise, Clamp) {
  std::mt19937 rng(8);
  Arg f = random(DType::F32, {300, 200}, rng);
  for (json attrs : {json{{"min", -1.5}, {"max", 2}}, json{{"min", 0.25}, {"max", nullptr}},
                     json{{"max", -0.5}}, json{{"min", 2}, {"max", 1}}}) {
    SCOPED_TRACE(attrs.dump());
    std::vector<double> want;
    for (double v : values(f)) {
      if (attrs.contains("min") && !attrs["min"].is_null()) v = std::max(v, double(float(attrs["min"].get<double>())));
      if (attrs.contains("max") && !attrs["max"].is_null()) v = std::min(v, double(float(attrs["max"].get<double>())));
      want.push_back(v);
    }
    expect_close(run("aten.clamp.default", attrs, {f})[0], want, 0);
  }
  // NaN propagates; an int tensor keeps int64 with int bounds, gives float32 with float ones.
  auto n = run("aten.clamp.default", {{"min", 0}, {"max", 1}}, {tensor(DType::F32, {2}, {NAN, 3})});
  EXPECT_TRUE(std::isnan(n[0].data<float>()[0]));
  EXPECT_EQ(n[0].data<float>()[1], 1.f);
  Arg i = tensor(DType::I64, {4}, {-3, 0, 2, 9});
  auto ci = run("aten.clamp.default", {{"min", -1}, {"max", 5}}, {i});
  EXPECT_EQ(ci[0].tensor().dtype, DType::I64);
  expect_close(ci[0], {-1, 0, 2, 5}, 0);
  auto cf = run("aten.clamp.default", {{"min", 0.5}}, {i});
  EXPECT_EQ(cf[0].tensor().dtype, DType::F32);
  expect_close(cf[0], {0.5, 0.5, 2, 9}, 0);
  expect_error([&] { infer("aten.clamp.default", {{"min", nullptr}, {"max", nullptr}}, {f}); },
               "node 'n1' (aten.clamp.default): at least one of 'min' or 'max' must be given");
}

TEST(Elementwise, CloneAndToCopy) {
  Arg f = tensor(DType::F32, {2, 2}, {1.5, -2.5, 0, 3.75});
  expect_close(run("aten.clone.default", {{"memory_format", nullptr}}, {f})[0], values(f), 0);
  auto i = run("aten._to_copy.default", {{"dtype", "int64"}, {"layout", nullptr}, {"device", nullptr}}, {f});
  EXPECT_EQ(i[0].tensor().dtype, DType::I64);
  expect_close(i[0], {1, -2, 0, 3}, 0);
  auto b = run("aten._to_copy.default", {{"dtype", "bool"}}, {f});
  expect_close(b[0], {1, 1, 0, 1}, 0);
  auto d = run("aten._to_copy.default", {{"dtype", "float64"}}, {f});
  expect_close(d[0], values(f), 0);
  auto same = run("aten._to_copy.default", {{"dtype", nullptr}}, {f});
  EXPECT_EQ(same[0].tensor().dtype, DType::F32);
}

TEST(Elementwise, Where) {
  std::mt19937 rng(11);
  const std::vector<std::vector<Shape>> shapes = {
      {{3, 4}, {3, 4}, {3, 4}}, {{3, 4}, {}, {}}, {{3, 1}, {1, 4}, {}}, {{2, 3, 4}, {3, 4}, {2, 1, 4}},
      {{300, 200}, {300, 200}, {}}, {{}, {5}, {5}}};
  for (const auto& s : shapes) {
    for (DType dt : {DType::F32, DType::I64}) {
      Arg c = random(DType::Bool, s[0], rng), a = random(dt, s[1], rng), b = random(dt, s[2], rng);
      auto out = run("aten.where.self", {}, {c, a, b});
      Shape os = out[0].tensor().shape;
      std::vector<double> want(out[0].numel());
      auto cv = values(c), av = values(a), bv = values(b);
      for (int64_t i = 0; i < out[0].numel(); ++i)
        want[i] = cv[bcast_index(i, os, s[0])] ? av[bcast_index(i, os, s[1])] : bv[bcast_index(i, os, s[2])];
      expect_close(out[0], want, 0);
    }
  }
  // self f32 tensor, other a wrapped float scalar -> f32; f32 vs i64 -> f32.
  Arg c = tensor(DType::Bool, {2}, {1, 0});
  auto out = run("aten.where.self", {}, {c, tensor(DType::I64, {2}, {1, 2}), tensor(DType::F32, {2}, {0.5, 0.25})});
  EXPECT_EQ(out[0].tensor().dtype, DType::F32);
  expect_close(out[0], {1, 0.25}, 0);
  expect_error([&] { infer("aten.where.self", {}, {tensor(DType::F32, {1}, {1}), c, c}); }, "must be bool");
}

TEST(Elementwise, GeluTanhApproximation) {
  std::mt19937 rng(6);
  for (DType dt : {DType::F32, DType::F64}) {
    Arg a = random(dt, {1000}, rng, -6, 6);
    auto out = run("aten.gelu.default", {{"approximate", "tanh"}}, {a});
    std::vector<double> want;
    const double k = std::sqrt(2 / M_PI);
    for (double x : values(a)) want.push_back(0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))));
    expect_close(out[0], want, dt == DType::F32 ? 2e-6 : 1e-14, gelu_atol("gelu", dt, 6));
  }
  expect_error([&] { infer("aten.gelu.default", {{"approximate", "fast"}}, {tensor(DType::F32, {1}, {1})}); },
               "approximate must be 'none' or 'tanh', got 'fast'");
}

TEST(Elementwise, MaskedFill) {
  std::mt19937 rng(12);
  // mask broadcast against self, and self against mask (the result is both broadcast).
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{2, 3, 4, 4}, {4, 4}}, {{3, 1}, {3, 5}}, {{300, 200}, {200}}, {{5}, {}}};
  for (const auto& [ss, ms] : shapes) {
    for (DType dt : {DType::F32, DType::F64, DType::I64, DType::Bool}) {
      Arg self = random(dt, ss, rng), mask = random(DType::Bool, ms, rng);
      const double v = dt == DType::Bool ? 1 : dt == DType::I64 ? -7 : -2.5;
      auto out = run("aten.masked_fill.Scalar", {{"value", v}}, {self, mask});
      EXPECT_EQ(out[0].tensor().dtype, dt);
      Shape os = out[0].tensor().shape;
      std::vector<double> want(out[0].numel());
      auto sv = values(self), mv = values(mask);
      for (int64_t i = 0; i < out[0].numel(); ++i)
        want[i] = mv[bcast_index(i, os, ms)] ? v : sv[bcast_index(i, os, ss)];
      expect_close(out[0], want, 0);
    }
  }
  auto inf = run("aten.masked_fill.Scalar", {{"value", "-inf"}},
                 {tensor(DType::F32, {3}, {1, 2, 3}), tensor(DType::Bool, {3}, {0, 1, 0})});
  EXPECT_EQ(inf[0].data<float>()[1], -INFINITY);
  expect_error([&] { infer("aten.masked_fill.Scalar", {{"value", 0}}, {tensor(DType::F32, {2}, {1, 2}), tensor(DType::F32, {2}, {1, 0})}); },
               "input 1 must be bool");
}

TEST(Elementwise, Errors) {
  Arg a = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), b = tensor(DType::F32, {4}, {1, 2, 3, 4});
  expect_error([&] { infer("aten.add.Tensor", {}, {a, b}); },
               "node 'n1' (aten.add.Tensor): shapes cannot be broadcast together: [2, 3] [4]");
  expect_error([&] { infer("aten.mul.Tensor", {}, {a}); }, "expected 2 inputs");
  expect_error([&] { infer("aten.add.Scalar", {}, {a}); }, "missing attribute 'other'");
}

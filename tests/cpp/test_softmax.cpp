// softmax / log_softmax and their backward against float64 references: the
// formulas directly for the forward, central differences of that reference
// for the backward.
#include "op_test_util.h"

using namespace ts_test;

namespace {

// Softmax (or log_softmax) of a [O, R, I] tensor along R, in double.
std::vector<double> ref(const std::vector<double>& x, int64_t O, int64_t R, int64_t I, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      auto at = [&](int64_t r) { return (o * R + r) * I + i; };
      double m = -INFINITY, s = 0;
      for (int64_t r = 0; r < R; ++r) m = std::max(m, x[at(r)]);
      for (int64_t r = 0; r < R; ++r) s += std::exp(x[at(r)] - m);
      for (int64_t r = 0; r < R; ++r)
        y[at(r)] = log ? x[at(r)] - m - std::log(s) : std::exp(x[at(r)] - m) / s;
    }
  return y;
}

std::vector<double> as_double(const ts::HostTensor& t) {
  return std::vector<double>(f32(t), f32(t) + t.view.numel());
}

}  // namespace

TEST(Softmax, ForwardEveryDim) {
  std::mt19937 rng(1);
  const ts::Shape s = {3, 5, 4};
  auto x = random_f32(s, rng, -4.f, 4.f);
  for (bool log : {false, true}) {
    const std::string op = log ? "aten._log_softmax.default" : "aten._softmax.default";
    for (int dim : {0, 1, 2, -1}) {
      const int d = dim < 0 ? dim + 3 : dim;
      int64_t O = 1, I = 1;
      for (int k = 0; k < d; ++k) O *= s[k];
      for (int k = d + 1; k < 3; ++k) I *= s[k];
      auto y = run_op(op, {{"dim", dim}, {"half_to_float", false}}, {&x});
      auto want = ref(as_double(x), O, s[d], I, log);
      SCOPED_TRACE(op + " dim " + std::to_string(dim));
      // log_softmax = x - (max + log sum) cancels: allow an ulp of |x| <= 4.
      EXPECT_TRUE(all_close(y[0], std::vector<float>(want.begin(), want.end()), 1e-6f, log ? 5e-7f : 1e-7f));
    }
  }
}

TEST(Softmax, MaskedRowsAndLargeInputs) {
  // -inf entries (a causal mask) get probability 0; large logits do not overflow.
  ts::HostTensor x(ts::DType::F32, {2, 3});
  const float v[] = {-INFINITY, 1000.f, 999.f, 0.f, -INFINITY, -INFINITY};
  std::copy(v, v + 6, x.view.as<float>());
  auto y = run_op("aten._softmax.default", {{"dim", 1}, {"half_to_float", false}}, {&x});
  const double e = std::exp(-1.0);
  EXPECT_TRUE(all_close(y[0], {0.f, float(1 / (1 + e)), float(e / (1 + e)), 1.f, 0.f, 0.f}, 1e-6f, 0));
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(2);
  const int64_t O = 2, R = 5, I = 3;
  auto x = random_f32({O, R, I}, rng, -2.f, 2.f);
  auto g = random_f32({O, R, I}, rng);
  for (bool log : {false, true}) {
    const std::string fwd = log ? "aten._log_softmax.default" : "aten._softmax.default";
    const std::string bwd = log ? "aten._log_softmax_backward_data.default" : "aten._softmax_backward_data.default";
    auto y = run_op(fwd, {{"dim", 1}, {"half_to_float", false}}, {&x});
    auto dx = run_op(bwd, {{"dim", 1}, {"input_dtype", "float32"}}, {&g, &y[0]});
    auto xd = as_double(x), gd = as_double(g);
    for (size_t i = 0; i < xd.size(); ++i) {
      auto loss = [&] {
        auto yy = ref(xd, O, R, I, log);
        double s = 0;
        for (size_t k = 0; k < yy.size(); ++k) s += gd[k] * yy[k];
        return s;
      };
      const double keep = xd[i], h = 1e-6;
      xd[i] = keep + h;
      const double up = loss();
      xd[i] = keep - h;
      const double down = loss();
      xd[i] = keep;
      EXPECT_NEAR(f32(dx[0])[i], (up - down) / (2 * h), 2e-5) << fwd << " element " << i;
    }
  }
}

TEST(Softmax, Errors) {
  ts::TensorType f{ts::DType::F32, {2, 3}}, i64{ts::DType::I64, {2, 3}};
  EXPECT_NE(infer_error("aten._softmax.default", {{"dim", 2}, {"half_to_float", false}}, {f}).find("dim 2 is out of range"),
            std::string::npos);
  EXPECT_NE(infer_error("aten._softmax.default", {{"dim", 1}, {"half_to_float", false}}, {i64}).find("must be float32, float64 or bfloat16"),
            std::string::npos);
  EXPECT_NE(infer_error("aten._softmax_backward_data.default", {{"dim", 1}, {"input_dtype", "float32"}},
                        {f, ts::TensorType{ts::DType::F32, {3, 2}}})
                .find("output float32[3, 2] must match grad_output float32[2, 3]"),
            std::string::npos);
}

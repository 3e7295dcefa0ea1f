// aten.native_batch_norm(+_backward) against a float64 reference of
// PyTorch's formulas; the reference backward is itself checked against
// central differences of the reference forward. Per-op comparisons with
// PyTorch run in the Python oracle suite.
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

using namespace ts_test;
using ts::DType;
using ts::HostTensor;

namespace {

const char* kFwd = "aten.native_batch_norm.default";
const char* kBwd = "aten.native_batch_norm_backward.default";

struct Case {
  ts::Shape shape;
  bool affine;
};

int64_t channels(const ts::Shape& s) { return s[1]; }
int64_t inner(const ts::Shape& s) {
  int64_t r = 1;
  for (size_t d = 2; d < s.size(); ++d) r *= s[d];
  return r;
}

// Float64 reference of the training-mode forward: y, mean, invstd.
struct Ref {
  std::vector<double> y, mean, invstd;
};
Ref ref_forward(const ts::Shape& s, const std::vector<double>& x, const std::vector<double>* w,
                const std::vector<double>* b, double eps) {
  const int64_t N = s[0], C = channels(s), S = inner(s), M = N * S;
  Ref r;
  r.y.resize(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < S; ++k) m += x[(n * C + c) * S + k];
    m /= M;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < S; ++k) v += std::pow(x[(n * C + c) * S + k] - m, 2);
    v /= M;
    double is = 1 / std::sqrt(v + eps);
    r.mean.push_back(m);
    r.invstd.push_back(is);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < S; ++k) {
        int64_t i = (n * C + c) * S + k;
        r.y[i] = (x[i] - m) * is * (w ? (*w)[c] : 1.0) + (b ? (*b)[c] : 0.0);
      }
  }
  return r;
}

// PyTorch's training-mode backward in float64: gi, gw, gb.
void ref_backward(const ts::Shape& s, const std::vector<double>& x, const std::vector<double>& go,
                  const std::vector<double>* w, const Ref& f, std::vector<double>& gi,
                  std::vector<double>& gw, std::vector<double>& gb) {
  const int64_t N = s[0], C = channels(s), S = inner(s), M = N * S;
  gi.assign(x.size(), 0);
  gw.assign(C, 0);
  gb.assign(C, 0);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, dot = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < S; ++k) {
        int64_t i = (n * C + c) * S + k;
        sum += go[i];
        dot += (x[i] - f.mean[c]) * go[i];
      }
    gb[c] = sum;
    gw[c] = dot * f.invstd[c];
    double kk = dot * f.invstd[c] * f.invstd[c] / M, wc = w ? (*w)[c] : 1.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < S; ++k) {
        int64_t i = (n * C + c) * S + k;
        gi[i] = (go[i] - sum / M - (x[i] - f.mean[c]) * kk) * f.invstd[c] * wc;
      }
  }
}

std::vector<double> as_double(const HostTensor& t) {
  const float* p = f32(t);
  return std::vector<double>(p, p + t.view.numel());
}
std::vector<float> as_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

json fwd_attrs(bool training) { return {{"training", training}, {"momentum", 0.1}, {"eps", 1e-5}}; }
json bwd_attrs(bool train) {
  return {{"train", train}, {"eps", 1e-5}, {"output_mask", {true, true, true}}};
}

// offset shifts the data's mean; y_atol allows for y = x * alpha + beta
// (PyTorch's form) rounding beta = b - mean * alpha at |mean| >> 1.
void check_training(const Case& c, uint32_t seed, float offset, float y_atol = 1e-5f) {
  std::mt19937 rng(seed);
  HostTensor x = random_f32(c.shape, rng, offset - 2.f, offset + 2.f);
  HostTensor w = random_f32({channels(c.shape)}, rng, 0.5f, 1.5f);
  HostTensor b = random_f32({channels(c.shape)}, rng);
  const HostTensor* wp = c.affine ? &w : nullptr;
  const HostTensor* bp = c.affine ? &b : nullptr;
  std::vector<double> xd = as_double(x), wd = as_double(w), bd = as_double(b);
  Ref r = ref_forward(c.shape, xd, c.affine ? &wd : nullptr, c.affine ? &bd : nullptr, 1e-5);

  std::vector<ts::TensorType> types;
  auto out = run_op(kFwd, fwd_attrs(true), {&x, wp, bp, nullptr, nullptr}, &types);
  ASSERT_EQ(types[0], x.view.type());
  ASSERT_EQ(types[1].shape, (ts::Shape{channels(c.shape)}));
  EXPECT_TRUE(all_close(out[0], as_float(r.y), 1e-5f, y_atol));
  EXPECT_TRUE(all_close(out[1], as_float(r.mean), 1e-6f, 1e-6f));
  EXPECT_TRUE(all_close(out[2], as_float(r.invstd), 1e-6f, 0));

  HostTensor go = random_f32(c.shape, rng);
  std::vector<double> gi, gw, gb;
  ref_backward(c.shape, xd, as_double(go), c.affine ? &wd : nullptr, r, gi, gw, gb);
  auto g = run_op(kBwd, bwd_attrs(true), {&go, &x, wp, nullptr, nullptr, &out[1], &out[2]});
  EXPECT_TRUE(all_close(g[0], as_float(gi), 1e-4f, 1e-5f));
  EXPECT_TRUE(all_close(g[1], as_float(gw), 1e-4f, 1e-4f));
  EXPECT_TRUE(all_close(g[2], as_float(gb), 1e-5f, 1e-4f));
}

}  // namespace

TEST(BatchNorm, ReferenceBackwardIsTheGradient) {
  // d/dx_i of sum(go * y(x)) by central differences of the float64 forward.
  ts::Shape s{3, 2, 5};
  std::mt19937 rng(9);
  std::vector<double> x = as_double(random_f32(s, rng)), go = as_double(random_f32(s, rng));
  std::vector<double> w = {0.7, 1.3}, b = {0.1, -0.2};
  Ref f = ref_forward(s, x, &w, &b, 1e-5);
  std::vector<double> gi, gw, gb;
  ref_backward(s, x, go, &w, f, gi, gw, gb);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                  const std::vector<double>& bb) {
    Ref r = ref_forward(s, xx, &ww, &bb, 1e-5);
    double l = 0;
    for (size_t i = 0; i < xx.size(); ++i) l += go[i] * r.y[i];
    return l;
  };
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x;
    xp[i] += h, xm[i] -= h;
    EXPECT_NEAR((loss(xp, w, b) - loss(xm, w, b)) / (2 * h), gi[i], 1e-6) << "x[" << i << "]";
  }
  for (size_t c = 0; c < 2; ++c) {
    auto wp = w, wm = w, bp = b, bm = b;
    wp[c] += h, wm[c] -= h, bp[c] += h, bm[c] -= h;
    EXPECT_NEAR((loss(x, wp, b) - loss(x, wm, b)) / (2 * h), gw[c], 1e-6);
    EXPECT_NEAR((loss(x, w, bp) - loss(x, w, bm)) / (2 * h), gb[c], 1e-6);
  }
}

TEST(BatchNorm, TrainingMatchesReference) {
  std::vector<Case> cases = {
      {{8, 16, 7, 7}, true},   // conv feature map
      {{16, 32}, true},        // BatchNorm1d after a linear layer
      {{4, 3, 11}, false},     // (N, C, L), no affine parameters
      {{2, 5, 3, 4, 2}, true}, // 3-d
      {{64, 4, 9, 9}, true},   // enough work to run in parallel
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(ts::shape_str(c.shape));
    check_training(c, seed++, 0.f);
  }
}

TEST(BatchNorm, LargeMeanStaysAccurate) {
  // |mean| / std = 870: a naive single-pass E[x^2] - E[x]^2 in float loses
  // the variance; the shifted double accumulation must not (invstd to 1e-6).
  // y: ulp(1000) = 6e-5 bounds what float32 can do.
  check_training({{16, 4, 6, 6}, true}, 5, 1000.f, 2e-4f);
}

TEST(BatchNorm, EvalUsesRunningStats) {
  std::mt19937 rng(3);
  ts::Shape s{4, 3, 5, 5};
  HostTensor x = random_f32(s, rng), w = random_f32({3}, rng), b = random_f32({3}, rng);
  HostTensor rm = random_f32({3}, rng), rv = random_f32({3}, rng, 0.5f, 2.f);
  std::vector<ts::TensorType> types;
  auto out = run_op(kFwd, fwd_attrs(false), {&x, &w, &b, &rm, &rv}, &types);
  EXPECT_EQ(types[1].shape, (ts::Shape{0}));
  std::vector<float> want(x.view.numel()), gi(x.view.numel());
  HostTensor go = random_f32(s, rng);
  std::vector<double> gw(3, 0), gb(3, 0);
  for (int64_t i = 0; i < x.view.numel(); ++i) {
    int64_t c = (i / 25) % 3;
    double is = 1 / std::sqrt(double(f32(rv)[c]) + 1e-5);
    want[i] = float((f32(x)[i] - f32(rm)[c]) * is * f32(w)[c] + f32(b)[c]);
    gi[i] = float(f32(go)[i] * is * f32(w)[c]);
    gw[c] += f32(go)[i] * (f32(x)[i] - f32(rm)[c]) * is;
    gb[c] += f32(go)[i];
  }
  EXPECT_TRUE(all_close(out[0], want, 1e-5f, 1e-5f));
  HostTensor empty(DType::F32, {0});
  auto g = run_op(kBwd, bwd_attrs(false), {&go, &x, &w, &rm, &rv, &empty, &empty});
  EXPECT_TRUE(all_close(g[0], gi, 1e-5f, 1e-6f));
  EXPECT_TRUE(all_close(g[1], as_float(gw), 1e-4f, 1e-5f));
  EXPECT_TRUE(all_close(g[2], as_float(gb), 1e-5f, 1e-5f));
}

TEST(BatchNorm, SkipsUnreadOutputs) {
  std::mt19937 rng(4);
  ts::Shape s{6, 2, 3};
  HostTensor x = random_f32(s, rng), go = random_f32(s, rng);
  auto f = run_op(kFwd, fwd_attrs(true), {&x, nullptr, nullptr, nullptr, nullptr}, nullptr,
                  {false, true, true});  // saves unread: forward still normalises
  auto full = run_op(kFwd, fwd_attrs(true), {&x, nullptr, nullptr, nullptr, nullptr});
  EXPECT_TRUE(all_close(f[0], std::vector<float>(f32(full[0]), f32(full[0]) + 36), 0, 0));
  json a = bwd_attrs(true);
  auto all = run_op(kBwd, a, {&go, &x, nullptr, nullptr, nullptr, &full[1], &full[2]});
  auto only_b = run_op(kBwd, a, {&go, &x, nullptr, nullptr, nullptr, &full[1], &full[2]}, nullptr,
                       {true, true, false});
  EXPECT_TRUE(all_close(only_b[2], {f32(all[2])[0], f32(all[2])[1]}, 0, 0));
}

TEST(BatchNorm, Errors) {
  auto T = [](ts::Shape s, DType d = DType::F32) { return ts::TensorType{d, s}; };
  const std::string f = "node 'n0' (aten.native_batch_norm.default): ";
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(true), {T({4, 3}), T({3}), T({3}), T({3}), T({3})}),
            f + "training mode with running stats would update them in place; the exporter "
                "passes none and updates them in the graph");
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(false), {T({4, 3}), T({3}), T({3}), {}, {}},
                        {true, true, true, false, false}),
            f + "eval mode (training=false) needs running_mean and running_var");
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(true), {T({4, 3}), T({4}), {}, {}, {}},
                        {true, true, false, false, false}),
            f + "weight must be float32[3] for input float32[4, 3], got float32[4]");
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(true), {T({4}), {}, {}, {}, {}},
                        {true, false, false, false, false}),
            f + "input must have rank >= 2 (N, C, ...), got float32[4]");
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(true), {T({4, 3}, DType::I64), {}, {}, {}, {}},
                        {true, false, false, false, false}),
            f + "only float32, float64 and bfloat16 are supported, got input int64[4, 3]");
  EXPECT_EQ(infer_error(kFwd, fwd_attrs(true), {T({1, 3, 1}), {}, {}, {}, {}},
                        {true, false, false, false, false}),
            f + "training mode needs more than 1 value per channel, got input float32[1, 3, 1]");
  const std::string b = "node 'n0' (aten.native_batch_norm_backward.default): ";
  EXPECT_EQ(infer_error(kBwd, bwd_attrs(true), {T({4, 3}), T({4, 3}), {}, {}, {}, {}, {}},
                        {true, true, false, false, false, false, false}),
            b + "training mode (train=true) needs save_mean and save_invstd");
  EXPECT_EQ(infer_error(kBwd, bwd_attrs(true), {T({4, 2}), T({4, 3}), {}, {}, {}, T({3}), T({3})},
                        {true, true, false, false, false, true, true}),
            b + "grad_out float32[4, 2] must match input float32[4, 3]");
}

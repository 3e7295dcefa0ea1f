// native_layer_norm and its backward against a float64 reference: the
// forward formula directly, the backward by central differences of that
// reference (an oracle independent of the kernel's gradient formula).
#include "op_test_util.h"

using namespace ts_test;

namespace {

// y = (x - mean) / sqrt(var + eps) * w + b per row of n, in double.
std::vector<double> ln_ref(const std::vector<double>& x, const std::vector<double>* w,
                           const std::vector<double>* b, int64_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mu += x[r * n + i];
    mu /= n;
    for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mu) * (x[r * n + i] - mu);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = (x[r * n + i] - mu) / std::sqrt(var + eps);
      if (w) v *= (*w)[i];
      if (b) v += (*b)[i];
      y[r * n + i] = v;
    }
  }
  return y;
}

std::vector<double> as_double(const ts::HostTensor& t) {
  return std::vector<double>(f32(t), f32(t) + t.view.numel());
}

ts::HostTensor from_double(const std::vector<double>& v, const ts::Shape& s) {
  ts::HostTensor t(ts::DType::F32, s);
  for (size_t i = 0; i < v.size(); ++i) t.view.as<float>()[i] = static_cast<float>(v[i]);
  return t;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST(LayerNorm, ForwardMatchesReference) {
  std::mt19937 rng(3);
  const json attrs = {{"normalized_shape", {4, 5}}, {"eps", 1e-5}};
  for (bool affine : {true, false}) {
    auto x = random_f32({3, 2, 4, 5}, rng, -2.f, 3.f);
    auto w = random_f32({4, 5}, rng), b = random_f32({4, 5}, rng);
    auto out = run_op("aten.native_layer_norm.default", attrs,
                      {&x, affine ? &w : nullptr, affine ? &b : nullptr});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[1].view.shape, (ts::Shape{3, 2, 1, 1}));
    auto wd = as_double(w), bd = as_double(b);
    auto want = ln_ref(as_double(x), affine ? &wd : nullptr, affine ? &bd : nullptr, 20, 1e-5);
    EXPECT_TRUE(all_close(out[0], std::vector<float>(want.begin(), want.end()), 1e-5f, 1e-5f));
    // mean and rstd of the first row
    auto xd = as_double(x);
    double mu = 0, var = 0;
    for (int i = 0; i < 20; ++i) mu += xd[i];
    mu /= 20;
    for (int i = 0; i < 20; ++i) var += (xd[i] - mu) * (xd[i] - mu);
    EXPECT_NEAR(f32(out[1])[0], mu, 1e-6);
    EXPECT_NEAR(f32(out[2])[0], 1 / std::sqrt(var / 20 + 1e-5), 1e-5);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  const int64_t rows = 6, n = 7;
  const double eps = 1e-5;
  auto x = random_f32({2, 3, n}, rng, -2.f, 2.f);
  auto w = random_f32({n}, rng, 0.5f, 1.5f), b = random_f32({n}, rng);
  auto dy = random_f32({2, 3, n}, rng);
  auto fwd = run_op("aten.native_layer_norm.default", {{"normalized_shape", {n}}, {"eps", eps}},
                    {&x, &w, &b});
  auto g = run_op("aten.native_layer_norm_backward.default",
                  {{"normalized_shape", {n}}, {"output_mask", {true, true, true}}},
                  {&dy, &x, &fwd[1], &fwd[2], &w, &b});
  ASSERT_EQ(g.size(), 3u);
  // L = sum(dy * y): dL/dv by central differences of the double reference.
  auto xd = as_double(x), wd = as_double(w), bd = as_double(b), dyd = as_double(dy);
  auto loss = [&] { return dot(dyd, ln_ref(xd, &wd, &bd, n, eps)); };
  auto fd = [&](std::vector<double>& v, size_t i) {
    const double h = 1e-6, keep = v[i];
    v[i] = keep + h;
    const double up = loss();
    v[i] = keep - h;
    const double down = loss();
    v[i] = keep;
    return (up - down) / (2 * h);
  };
  for (size_t i = 0; i < xd.size(); ++i) EXPECT_NEAR(f32(g[0])[i], fd(xd, i), 2e-5) << "dx " << i;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(f32(g[1])[i], fd(wd, i), 2e-5) << "dw " << i;
    EXPECT_NEAR(f32(g[2])[i], fd(bd, i), 2e-5) << "db " << i;
  }
  // Without weight: the same gradient as weight 1.
  auto ones = from_double(std::vector<double>(n, 1.0), {n});
  auto g1 = run_op("aten.native_layer_norm_backward.default",
                   {{"normalized_shape", {n}}, {"output_mask", {true, false, false}}},
                   {&dy, &x, &fwd[1], &fwd[2], nullptr, nullptr});
  auto gw1 = run_op("aten.native_layer_norm_backward.default",
                    {{"normalized_shape", {n}}, {"output_mask", {true, false, false}}},
                    {&dy, &x, &fwd[1], &fwd[2], &ones, nullptr});
  EXPECT_TRUE(all_close(g1[0], std::vector<float>(f32(gw1[0]), f32(gw1[0]) + rows * n), 0, 0));
}

TEST(LayerNorm, LargeRowsRunInParallel) {
  // Enough rows to take the parallel path; every row must equal the serial result.
  std::mt19937 rng(9);
  auto x = random_f32({512, 256}, rng);
  auto w = random_f32({256}, rng), b = random_f32({256}, rng);
  const json attrs = {{"normalized_shape", {256}}, {"eps", 1e-5}};
  OpHarness two("aten.native_layer_norm.default", attrs, {&x, &w, &b}, 2);
  OpHarness one("aten.native_layer_norm.default", attrs, {&x, &w, &b}, 1);
  auto a = two.run({&x, &w, &b}), c = one.run({&x, &w, &b});
  EXPECT_TRUE(all_close(a[0], std::vector<float>(f32(c[0]), f32(c[0]) + 512 * 256), 0, 0));
}

TEST(LayerNorm, Errors) {
  auto f32t = [](ts::Shape s) { return ts::TensorType{ts::DType::F32, s}; };
  EXPECT_NE(infer_error("aten.native_layer_norm.default", {{"normalized_shape", {5}}, {"eps", 1e-5}},
                        {f32t({3, 4}), f32t({5}), f32t({5})})
                .find("normalized_shape [5] is not the trailing shape of input float32[3, 4]"),
            std::string::npos);
  EXPECT_NE(infer_error("aten.native_layer_norm.default", {{"normalized_shape", {4}}, {"eps", 1e-5}},
                        {f32t({3, 4}), f32t({3}), f32t({4})})
                .find("weight float32[3] must be float32[4]"),
            std::string::npos);
  EXPECT_NE(infer_error("aten.native_layer_norm.default", {{"normalized_shape", {4}}, {"eps", 1e-5}},
                        {ts::TensorType{ts::DType::F64, {3, 4}}, f32t({4}), f32t({4})})
                .find("weight float32[4] must be float64[4]"),
            std::string::npos);
  EXPECT_NE(infer_error("aten.native_layer_norm.default", {{"normalized_shape", {4}}, {"eps", 1e-5}},
                        {ts::TensorType{ts::DType::I64, {3, 4}}, f32t({4}), f32t({4})})
                .find("input must be float32, float64 or bfloat16, got int64[3, 4]"),
            std::string::npos);
  EXPECT_NE(infer_error("aten.native_layer_norm_backward.default",
                        {{"normalized_shape", {4}}, {"output_mask", {true, true, true}}},
                        {f32t({3, 4}), f32t({3, 4}), f32t({2, 1}), f32t({3, 1}), f32t({4}), f32t({4})})
                .find("mean float32[2, 1] must hold 3 float32 values"),
            std::string::npos);
}

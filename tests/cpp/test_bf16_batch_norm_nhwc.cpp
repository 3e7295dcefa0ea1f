// Batch norm's channels-last bfloat16 kernels (batch_norm_nhwc.cpp) against
// the plain bfloat16 kernels (the oracle: test_bf16_batch_norm.cpp and the
// PyTorch oracle cases test those). The arithmetic is the same and only the
// order of the double sums differs, so a saved statistic or coefficient may
// move by a float32 ulp, and a bfloat16 output by one bf16 ulp (plus a
// sliver of the tensor's scale near zero, where x * alpha + beta cancels).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bf16_test_util.h"
#include "op_test_util.h"
#include "test_util.h"
#include "trainstep/bfloat16.h"

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

namespace {

using bf16_test::bf16_ulp;
using bf16_test::random_bf16;

const char* kFwd = "aten.native_batch_norm.default";
const char* kBwd = "aten.native_batch_norm_backward.default";

HostTensor random_f32(const Shape& s, std::mt19937& rng, float lo, float hi) {
  HostTensor t(DType::F32, s);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<float>()[i] = u(rng);
  return t;
}

// (N, C, H, W) bfloat16 stored nchw -> the same tensor stored nhwc, or back.
HostTensor relayout(const HostTensor& x, bool to_nhwc) {
  const Shape& s = x.view.shape;
  HostTensor r(DType::BF16, s);
  const int64_t N = s[0], C = s[1], S = s[2] * s[3];
  const uint16_t* p = x.view.as<uint16_t>();
  uint16_t* q = r.view.as<uint16_t>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t plain = (n * C + c) * S + i, nhwc = (n * S + i) * C + c;
        if (to_nhwc) q[nhwc] = p[plain];
        else q[plain] = p[nhwc];
      }
  return r;
}

// The first `acts` inputs (the activations) and output 0 nhwc; the rest
// plain (absent from the lists).
json with_layouts(json a, int acts) {
  a["in_layouts"] = std::vector<std::string>(acts, "nhwc");
  a["out_layouts"] = {"nhwc"};
  return a;
}
json fwd_attrs(bool training) { return {{"training", training}, {"momentum", 0.1}, {"eps", 1e-5}}; }
json bwd_attrs(bool train, const std::vector<bool>& mask) {
  return {{"train", train}, {"eps", 1e-5}, {"output_mask", mask}};
}

// How far apart two outputs are: bitwise-equal elements, and the largest
// difference in bf16 ulps (bfloat16) or float32 ulps of the tensor's scale.
struct Diff {
  int64_t equal = 0, n = 0;
  double worst = 0;
};

// got against want; fails past one bf16 ulp (+ 2^-14 of the scale) for
// bfloat16, 8 float32 ulps of the scale for float32.
::testing::AssertionResult close(const HostTensor& got, const HostTensor& want, Diff* d = nullptr) {
  const int64_t n = want.view.numel();
  if (got.view.dtype != want.view.dtype || got.view.numel() != n)
    return ::testing::AssertionFailure() << "types differ";
  const bool bf = want.view.dtype == DType::BF16;
  auto val = [&](const HostTensor& t, int64_t i) {
    return bf ? ts::bf16_to_float(t.view.as<uint16_t>()[i]) : t.view.as<float>()[i];
  };
  float scale = 0.f;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(val(want, i)));
  for (int64_t i = 0; i < n; ++i) {
    const float a = val(got, i), b = val(want, i);
    const float unit = bf ? bf16_ulp(std::max(std::fabs(a), std::fabs(b))) : scale * 0x1p-24f;
    const float tol = bf ? unit + scale * 0x1p-14f : 8 * unit;
    if (d) {
      d->n++;
      if (a == b) d->equal++;
      else if (unit > 0) d->worst = std::max(d->worst, double(std::fabs(a - b) / unit));
    }
    if (!(std::fabs(a - b) <= tol))
      return ::testing::AssertionFailure() << "at " << i << ": got " << a << ", want " << b
                                           << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// Runs the op plain on `in` and channels-last on the same values (input
// ports in_nhwc relaid), and compares every output read.
void expect_matches(const std::string& op, const json& attrs, std::vector<const HostTensor*> in,
                    const std::vector<int>& in_nhwc, const std::vector<bool>& skip, Diff* d) {
  ts_test::OpHarness plain(op, attrs, in);
  std::vector<HostTensor> want = plain.run(in, skip);
  std::vector<HostTensor> relaid;
  relaid.reserve(in_nhwc.size());
  for (int i : in_nhwc) {
    relaid.push_back(relayout(*in[i], true));
    in[i] = &relaid.back();
  }
  ts_test::OpHarness nhwc(op, with_layouts(attrs, static_cast<int>(in_nhwc.size())), in);
  EXPECT_EQ(nhwc.out_types(), plain.out_types());
  std::vector<HostTensor> got = nhwc.run(in, skip);
  if (!skip[0]) got[0] = relayout(got[0], false);
  for (size_t j = 0; j < got.size(); ++j) {
    if (skip[j] || want[j].view.numel() == 0) continue;
    EXPECT_TRUE(close(got[j], want[j], d)) << op << " output " << j << " " << attrs.dump();
  }
}

// Forward (all outputs, saves only, y only) and backward with every
// output_mask, from the plain forward's saves.
void run_case(const Shape& s, std::mt19937& rng, bool affine, bool training, float offset, Diff* d) {
  SCOPED_TRACE(ts::shape_str(s) + (affine ? " affine" : "") + (training ? " training" : " eval") +
               " offset " + std::to_string(offset));
  const int64_t C = s[1];
  HostTensor x = random_bf16(s, rng, offset - 2.f, offset + 2.f);
  HostTensor w = random_f32({C}, rng, 0.5f, 1.5f), b = random_f32({C}, rng, -1.f, 1.f);
  HostTensor rm = random_f32({C}, rng, offset - 0.5f, offset + 0.5f);
  HostTensor rv = random_f32({C}, rng, 0.5f, 2.f);
  const HostTensor* wp = affine ? &w : nullptr;
  const HostTensor* bp = affine ? &b : nullptr;
  const HostTensor* rmp = training ? nullptr : &rm;
  const HostTensor* rvp = training ? nullptr : &rv;
  const std::vector<const HostTensor*> fin = {&x, wp, bp, rmp, rvp};
  expect_matches(kFwd, fwd_attrs(training), fin, {0}, {false, false, false}, d);
  if (training) {
    expect_matches(kFwd, fwd_attrs(training), fin, {0}, {true, false, false}, d);
    expect_matches(kFwd, fwd_attrs(training), fin, {0}, {false, true, true}, d);
  }
  ts_test::OpHarness f(kFwd, fwd_attrs(training), fin);
  std::vector<HostTensor> fo = f.run(fin);
  HostTensor go = random_bf16(s, rng, -1.f, 1.f);
  const std::vector<const HostTensor*> bin = {&go, &x, wp, rmp, rvp, training ? &fo[1] : nullptr,
                                              training ? &fo[2] : nullptr};
  for (int m = 1; m < 8; ++m) {
    const std::vector<bool> mask = {bool(m & 1), bool(m & 2), bool(m & 4)};
    expect_matches(kBwd, bwd_attrs(training, mask), bin, {0, 1}, {!mask[0], !mask[1], !mask[2]}, d);
  }
}

void report(const char* what, const Diff& d) {
  ::testing::Test::RecordProperty(std::string(what) + "_equal", std::to_string(d.equal) + "/" + std::to_string(d.n));
  std::printf("[ nhwc vs plain ] %s: %lld of %lld values bitwise equal, worst %.3g ulps\n", what,
              static_cast<long long>(d.equal), static_cast<long long>(d.n), d.worst);
}

}  // namespace

// S = 1, channels over and under the conversion chunk (256), one channel,
// N = 1 (rows split within the sample), and sizes that run multithreaded.
TEST(Bf16BatchNormNhwc, MatchesThePlainKernels) {
  const std::vector<Shape> shapes = {{2, 3, 4, 5},  {16, 3, 1, 1},   {3, 300, 2, 3}, {2, 1, 6, 7},
                                     {1, 5, 9, 11}, {4, 16, 32, 32}, {2, 64, 17, 19}, {1, 520, 8, 9},
                                     {8, 64, 14, 14}};
  std::mt19937 rng(31);
  Diff d;
  for (const Shape& s : shapes)
    for (int affine = 0; affine < 2; ++affine)
      for (int training = 0; training < 2; ++training)
        for (float offset : {0.f, 30.f}) run_case(s, rng, affine, training, offset, &d);
  report("fixed shapes", d);
}

TEST(Bf16BatchNormNhwc, RandomShapes) {
  std::mt19937 rng(32);
  std::uniform_int_distribution<int> n(1, 6), c(1, 300), hw(1, 24);
  Diff d;
  for (int t = 0; t < 30; ++t) {
    const Shape s = {n(rng) + 1, c(rng) % (t % 3 ? 40 : 300) + 1, hw(rng), hw(rng)};
    run_case(s, rng, t % 2, (t / 2) % 2, t % 3 == 0 ? 100.f : 0.f, &d);
  }
  report("random shapes", d);
}

// The sums are added in an order fixed by the shape: 1 and 2 threads give
// identical bits, forward and backward, whether the units are whole samples
// or parts of one.
TEST(Bf16BatchNormNhwc, ThreadCountDoesNotChangeTheBits) {
  std::mt19937 rng(33);
  const int saved = omp_get_max_threads();
  for (const Shape& s : std::vector<Shape>{{1, 32, 64, 64}, {16, 64, 12, 12}, {3, 300, 20, 20}}) {
    SCOPED_TRACE(ts::shape_str(s));
    const int64_t C = s[1];
    HostTensor x = relayout(random_bf16(s, rng, 3.f, 7.f), true), go = random_bf16(s, rng);
    HostTensor w = random_f32({C}, rng, 0.5f, 1.5f), b = random_f32({C}, rng, -1.f, 1.f);
    const json fa = with_layouts(fwd_attrs(true), 1);
    const json ba = with_layouts(bwd_attrs(true, {true, true, true}), 2);
    std::vector<std::vector<HostTensor>> outs;
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      ts_test::OpHarness f(kFwd, fa, {&x, &w, &b, nullptr, nullptr});
      std::vector<HostTensor> fo = f.run({&x, &w, &b, nullptr, nullptr});
      ts_test::OpHarness g(kBwd, ba, {&go, &x, &w, nullptr, nullptr, &fo[1], &fo[2]});
      std::vector<HostTensor> bo = g.run({&go, &x, &w, nullptr, nullptr, &fo[1], &fo[2]});
      for (auto& t : bo) fo.push_back(std::move(t));
      outs.push_back(std::move(fo));
    }
    omp_set_num_threads(saved);
    for (size_t j = 0; j < outs[0].size(); ++j)
      EXPECT_EQ(0, std::memcmp(outs[0][j].view.data, outs[1][j].view.data, outs[0][j].view.nbytes()))
          << "output " << j;
  }
}

// nhwc is for rank-4 bfloat16 activations, the same on each activation port.
TEST(Bf16BatchNormNhwc, InferAcceptsNhwcForBfloat16Only) {
  std::mt19937 rng(34);
  HostTensor xb = random_bf16({2, 4, 3, 3}, rng), w = random_f32({4}, rng, 0.5f, 1.5f);
  HostTensor xf = random_f32({2, 4, 3, 3}, rng, -1.f, 1.f), x3 = random_bf16({2, 4, 9}, rng);
  HostTensor wd(DType::F64, {4});
  const json fa = with_layouts(fwd_attrs(true), 1);
  auto fwd_error = [&](const json& a, const HostTensor& x, const HostTensor& wt) {
    return ts_test::error_of([&] { ts_test::OpHarness(kFwd, a, {&x, &wt, &wt, nullptr, nullptr}); });
  };
  EXPECT_EQ(fwd_error(fa, xb, w), "<no error>");
  EXPECT_NE(fwd_error(fa, xf, w).find("needs bfloat16"), std::string::npos) << fwd_error(fa, xf, w);
  HostTensor xd(DType::F64, {2, 4, 3, 3});
  EXPECT_NE(fwd_error(fa, xd, wd).find("needs bfloat16"), std::string::npos) << fwd_error(fa, xd, wd);
  EXPECT_NE(fwd_error(fa, x3, w).find("rank 4"), std::string::npos) << fwd_error(fa, x3, w);
  json mixed = fa;
  mixed["out_layouts"] = {"plain", "plain", "plain"};
  EXPECT_NE(fwd_error(mixed, xb, w).find("one layout"), std::string::npos) << fwd_error(mixed, xb, w);
  json on_weight = fa;
  on_weight["in_layouts"] = {"nhwc", "nhwc"};
  EXPECT_NE(fwd_error(on_weight, xb, w).find("input 1 cannot take layout nhwc"), std::string::npos);

  HostTensor go = random_bf16({2, 4, 3, 3}, rng);
  auto bwd_error = [&](const json& a) {
    return ts_test::error_of([&] { ts_test::OpHarness(kBwd, a, {&go, &xb, &w, nullptr, nullptr, &w, &w}); });
  };
  const json ba = with_layouts(bwd_attrs(true, {true, true, true}), 2);
  EXPECT_EQ(bwd_error(ba), "<no error>");
  json half = ba;
  half["in_layouts"] = {"plain", "nhwc"};
  EXPECT_NE(bwd_error(half).find("one layout"), std::string::npos) << bwd_error(half);
}

// Batch norm's bfloat16 kernels (Bf16::Native; torch's autocast form:
// bfloat16 activations, float32 per-channel tensors) against the same
// node's float32 kernel run on the same bf16-exact inputs and rounded once
// (make_kernel's ViaFloat32 form). Both use the same double sums and float
// coefficients, so bfloat16 outputs may differ by one bf16 ulp (summation
// order moving a coefficient by a float32 ulp) and float32 outputs by a few
// float32 ulps of their scale.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bf16_test_util.h"
#include "ops/op.h"
#include "trainstep/bfloat16.h"

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

namespace {

using bf16_test::Bf16Node;
using bf16_test::bf16_ulp;
using bf16_test::random_bf16;

const char* kFwd = "aten.native_batch_norm.default";
const char* kBwd = "aten.native_batch_norm_backward.default";

HostTensor random_f32(const Shape& s, std::mt19937& rng, float lo, float hi) {
  HostTensor t(DType::F32, s);
  std::uniform_real_distribution<float> u(lo, hi);
  float* p = t.view.as<float>();
  for (int64_t i = 0; i < t.view.numel(); ++i) p[i] = u(rng);
  return t;
}

// bfloat16: one bf16 ulp of the element, plus a sliver of the tensor's
// scale for values near zero (a float32 ulp of x * alpha against a beta of
// opposite sign). float32: a few float32 ulps of the tensor's scale.
::testing::AssertionResult close(const HostTensor& got, const HostTensor& want) {
  const int64_t n = want.view.numel();
  if (got.view.dtype != want.view.dtype || got.view.numel() != n)
    return ::testing::AssertionFailure() << "types " << got.view.type().str() << " and "
                                         << want.view.type().str();
  const bool bf = want.view.dtype == DType::BF16;
  auto val = [&](const HostTensor& t, int64_t i) {
    return bf ? ts::bf16_to_float(t.view.as<uint16_t>()[i]) : t.view.as<float>()[i];
  };
  float scale = 0.f;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(val(want, i)));
  for (int64_t i = 0; i < n; ++i) {
    const float a = val(got, i), b = val(want, i);
    const float tol = bf ? bf16_ulp(std::max(std::fabs(a), std::fabs(b))) + scale * 0x1p-14f
                         : scale * 0x1p-21f;  // 8 float32 ulps
    if (!(std::fabs(a - b) <= tol))
      return ::testing::AssertionFailure() << "at " << i << " of " << want.view.type().str()
                                           << ": got " << a << ", want " << b << " (scale "
                                           << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

void expect_matches(const std::string& op, const json& attrs,
                    const std::vector<const HostTensor*>& in, const std::vector<bool>& skip) {
  Bf16Node n(op, attrs, in);
  EXPECT_EQ(n.out_types[0].dtype, DType::BF16);
  std::vector<HostTensor> got = n.run(*n.native, in, skip);
  std::vector<HostTensor> want = n.run(*n.via_f32, in, skip);
  for (size_t j = 0; j < got.size(); ++j) {
    if (skip[j] || want[j].view.numel() == 0) continue;
    EXPECT_TRUE(close(got[j], want[j])) << op << " output " << j << " " << attrs.dump();
  }
}

json fwd_attrs(bool training) { return {{"training", training}, {"momentum", 0.1}, {"eps", 1e-5}}; }
json bwd_attrs(bool train, const std::vector<bool>& mask) {
  return {{"train", train}, {"eps", 1e-5}, {"output_mask", mask}};
}

// Rank 2 (S = 1), rank 3 and 4, S = 1 at rank 4, S over and under the
// conversion chunk, one channel, and sizes that run the channels in parallel.
const std::vector<Shape> kShapes = {{8, 5},         {300, 3},      {3, 4, 5, 7},  {16, 3, 1, 1},
                                    {2, 3, 300},    {2, 1, 600},   {4, 16, 32, 32}, {2, 64, 17, 19},
                                    {5, 2, 513},    {2, 6}};

std::string str(const Shape& s) { return ts::shape_str(s); }

// Both modes, affine or not, with the data's mean well away from 0 (the
// shift) or near it, then the backward of each with every output_mask.
void run_case(const Shape& s, std::mt19937& rng, bool affine, bool training, float offset) {
  SCOPED_TRACE(str(s) + (affine ? " affine" : " no affine") + (training ? " training" : " eval") +
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
  expect_matches(kFwd, fwd_attrs(training), fin, {false, false, false});
  if (training) {
    expect_matches(kFwd, fwd_attrs(training), fin, {true, false, false});  // saves only
    expect_matches(kFwd, fwd_attrs(training), fin, {false, true, true});   // y only
  }

  // Saves from the float32 twin's forward (the values the backward reads).
  Bf16Node f(kFwd, fwd_attrs(training), fin);
  std::vector<HostTensor> fo = f.run(*f.via_f32, fin, {false, false, false});
  HostTensor go = random_bf16(s, rng, -1.f, 1.f);
  const HostTensor* sm = training ? &fo[1] : nullptr;
  const HostTensor* si = training ? &fo[2] : nullptr;
  const std::vector<const HostTensor*> bin = {&go, &x, wp, rmp, rvp, sm, si};
  for (int m = 1; m < 8; ++m) {
    const std::vector<bool> mask = {bool(m & 1), bool(m & 2), bool(m & 4)};
    expect_matches(kBwd, bwd_attrs(training, mask), bin, {!mask[0], !mask[1], !mask[2]});
  }
}

}  // namespace

TEST(Bf16BatchNorm, MatchesFloat32KernelRoundedOnce) {
  std::mt19937 rng(21);
  for (const Shape& s : kShapes)
    for (int affine = 0; affine < 2; ++affine)
      for (int training = 0; training < 2; ++training)
        for (float offset : {0.f, 20.f}) run_case(s, rng, affine, training, offset);
}

TEST(Bf16BatchNorm, RandomShapes) {
  std::mt19937 rng(22);
  std::uniform_int_distribution<int> rank(2, 5), small(1, 9), big(1, 700);
  for (int t = 0; t < 40; ++t) {
    Shape s;
    const int r = rank(rng);
    s.push_back(small(rng) + 1);  // N >= 2: training needs M > 1
    s.push_back(small(rng));
    for (int d = 2; d < r; ++d) s.push_back(d == r - 1 ? big(rng) % (r > 3 ? 40 : 700) + 1 : small(rng));
    run_case(s, rng, t % 2, (t / 2) % 2, t % 3 == 0 ? 50.f : 0.f);
  }
}

// The kernels are picked for bfloat16 and keep torch's mixed dtypes.
TEST(Bf16BatchNorm, MixedTypes) {
  std::mt19937 rng(23);
  HostTensor x = random_bf16({4, 3, 5}, rng, -1.f, 1.f), w = random_f32({3}, rng, 0.5f, 1.5f);
  Bf16Node f(kFwd, fwd_attrs(true), {&x, &w, &w, nullptr, nullptr});
  EXPECT_EQ(f.out_types[0], x.view.type());
  EXPECT_EQ(f.out_types[1].dtype, DType::F32);
  EXPECT_EQ(f.out_types[2].dtype, DType::F32);
  EXPECT_EQ(ts::OpRegistry::get().find(kBwd)->bf16, ts::Bf16::Native);
}

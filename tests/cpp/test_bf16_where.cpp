// where on a bfloat16 result (Bf16::Native): bit selection when both value
// operands are bfloat16 or one-element floats (rounded once), against the
// float32 twin rounded once (make_kernel's ViaFloat32 form): identical bits.
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
using bf16_test::random_bf16;

HostTensor random_bool(const Shape& s, std::mt19937& rng) {
  HostTensor t(DType::Bool, s);
  bool* p = t.view.as<bool>();
  for (int64_t i = 0; i < t.view.numel(); ++i) p[i] = (rng() & 1) != 0;
  return t;
}

HostTensor filled(DType dt, const Shape& s, double v) {
  HostTensor t(dt, s);
  for (int64_t i = 0; i < t.view.numel(); ++i) {
    if (dt == DType::F32) t.view.as<float>()[i] = static_cast<float>(v);
    else if (dt == DType::F64) t.view.as<double>()[i] = v;
    else if (dt == DType::I64) t.view.as<int64_t>()[i] = static_cast<int64_t>(v);
  }
  return t;
}

void expect_same(const HostTensor& c, const HostTensor& a, const HostTensor& b) {
  Bf16Node n("aten.where.self", json::object(), {&c, &a, &b});
  ASSERT_EQ(n.out_types[0].dtype, DType::BF16);
  HostTensor got = std::move(n.run(*n.native, {&c, &a, &b})[0]);
  HostTensor want = std::move(n.run(*n.via_f32, {&c, &a, &b})[0]);
  ASSERT_EQ(got.view.type(), want.view.type());
  const uint16_t* g = got.view.as<uint16_t>();
  const uint16_t* w = want.view.as<uint16_t>();
  for (int64_t i = 0; i < want.view.numel(); ++i) ASSERT_EQ(g[i], w[i]) << "at " << i;
}

TEST(Bf16Where, SelectsBitsAsTheFloat32Twin) {
  std::mt19937 rng(5);
  const struct {
    Shape c, a, b;
  } shapes[] = {{{32, 4, 64, 64}, {32, 4, 64, 64}, {32, 4, 64, 64}},  // parallel
                {{1, 1, 64, 64}, {32, 4, 64, 64}, {}},                // attention mask
                {{3, 1}, {1, 4}, {}},
                {{129, 257}, {257}, {129, 257}},
                {{5}, {}, {}}};
  for (const auto& s : shapes) {
    SCOPED_TRACE((ts::TensorType{DType::BF16, s.a}).str());
    HostTensor c = random_bool(s.c, rng);
    HostTensor a = random_bf16(s.a, rng, -3.f, 3.f);
    HostTensor b = random_bf16(s.b, rng, -3.f, 3.f);
    expect_same(c, a, b);
    // A 0-d float operand beside a dimensioned bfloat16 one (two 0-d
    // operands promote to the float's dtype): rounded once (0.1 is no
    // bfloat16 value; -inf is the attention mask's fill).
    if (s.a.empty()) continue;
    for (double v : {0.1, -double(INFINITY), 3.0e38, 1.0 + 0x1p-8 + 0x1p-30}) {
      HostTensor f32 = filled(DType::F32, {}, v), f64 = filled(DType::F64, {}, v);
      expect_same(c, a, f32);
      expect_same(c, f64, a);
    }
  }
}

TEST(Bf16Where, OtherOperandsTakeTheFloat32Twin) {
  std::mt19937 rng(6);
  HostTensor c = random_bool({4, 5}, rng);
  HostTensor a = random_bf16({4, 5}, rng);
  HostTensor i = filled(DType::I64, {4, 5}, 300001);  // int64 -> bfloat16 result
  expect_same(c, a, i);
}

}  // namespace

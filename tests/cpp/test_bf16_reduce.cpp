// sum.dim_IntList and mean.dim on bfloat16 (Bf16::Native: the reduction
// loops read bfloat16 in place) against the same node's float32 kernel on
// the widened input, rounded once (make_kernel's ViaFloat32 form). Both sum
// in double in the same order and round double -> float32 (-> bfloat16), so
// they agree bit for bit (NaN with NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bf16_test_util.h"
#include "ops/op.h"
#include "ops/reduce.h"
#include "trainstep/bfloat16.h"

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

namespace {

using bf16_test::Bf16Node;
using bf16_test::random_bf16;

bool is_nan(const uint8_t* p, DType dt) {
  if (dt == DType::BF16) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return std::isnan(ts::bf16_to_float(b));
  }
  if (dt == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  if (dt == DType::F64) {
    double d;
    std::memcpy(&d, p, 8);
    return std::isnan(d);
  }
  return false;
}

::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want) {
  if (got.view.type() != want.view.type())
    return ::testing::AssertionFailure() << "types " << got.view.type().str() << " and "
                                         << want.view.type().str();
  const DType dt = want.view.dtype;
  const size_t es = ts::dtype_size(dt);
  const auto* g = static_cast<const uint8_t*>(got.view.data);
  const auto* w = static_cast<const uint8_t*>(want.view.data);
  for (int64_t i = 0; i < want.view.numel(); ++i) {
    const uint8_t *a = g + i * es, *b = w + i * es;
    if (std::memcmp(a, b, es) != 0 && !(is_nan(a, dt) && is_nan(b, dt)))
      return ::testing::AssertionFailure() << "element " << i << " of " << want.view.type().str()
                                           << " differs";
  }
  return ::testing::AssertionSuccess();
}

struct Case {
  Shape shape;
  json dim;  // null: every dim
  bool keepdim;
  const char* dtype;  // nullptr: none
};

const std::vector<Case> kCases = {
    {{32, 64}, {-1}, false, nullptr},        // [O, R] rows
    {{8, 33, 17}, {1}, false, nullptr},      // [O, R, I] columns
    {{8, 33, 200}, {1}, true, nullptr},      // columns over several blocks
    {{4, 5, 6, 7}, {0, 2}, false, nullptr},  // general strided path
    {{4, 5, 6, 7}, {3, 1}, true, nullptr},
    {{3, 70001}, {1}, true, nullptr},        // few long rows, split across threads
    {{1, 300000}, {-1}, false, nullptr},
    {{6, 7}, json(), false, nullptr},        // every dim
    {{6, 7}, json::array(), true, nullptr},  // empty list: every dim
    {{}, json::array(), false, nullptr},     // 0-d
    {{0, 5}, {0}, false, nullptr},           // empty: sum 0, mean NaN
    {{8, 33, 17}, {0, 2}, false, "float32"},
    {{32, 64}, {-1}, true, "float32"},
    {{32, 64}, {0}, false, "float64"},
    {{5, 9}, {1}, false, "bfloat16"},
};

TEST(Bf16Reduce, SumAndMeanMatchFloat32Twin) {
  std::mt19937 rng(21);
  for (const char* op : {ts::opname::sum_dim, ts::opname::mean_dim})
    for (const Case& c : kCases) {
      json attrs = {{"dim", c.dim}, {"keepdim", c.keepdim}};
      if (c.dtype) attrs["dtype"] = c.dtype;
      SCOPED_TRACE(std::string(op) + " " + (ts::TensorType{DType::BF16, c.shape}).str() + " " + attrs.dump());
      HostTensor x = random_bf16(c.shape, rng, -3.f, 5.f);
      Bf16Node n(op, attrs, {&x});
      const std::vector<HostTensor> got = n.run(*n.native, {&x}), want = n.run(*n.via_f32, {&x});
      EXPECT_EQ(got[0].view.dtype, c.dtype ? ts::dtype_from_name(c.dtype) : DType::BF16);
      EXPECT_TRUE(same_bits(got[0], want[0]));
    }
}

// Large values whose sum rounds differently in bfloat16 than the exact
// sum would, NaN and inf in some rows.
TEST(Bf16Reduce, SpecialValuesMatchFloat32Twin) {
  std::mt19937 rng(22);
  HostTensor x = random_bf16({16, 300}, rng, -1000.f, 1000.f);
  uint16_t* p = x.view.as<uint16_t>();
  p[5] = 0x7FC0;                  // NaN in row 0
  p[300 + 7] = 0x7F80;            // +inf in row 1
  p[600 + 1] = 0x7F80;            // +inf and -inf in row 2: NaN
  p[600 + 2] = 0xFF80;
  for (int64_t r = 0; r < 300; ++r) p[900 + r] = 0x8000;  // row 3: all -0
  for (const char* op : {ts::opname::sum_dim, ts::opname::mean_dim})
    for (const json& dim : {json{1}, json{0}}) {
      SCOPED_TRACE(std::string(op) + " dim " + dim.dump());
      Bf16Node n(op, {{"dim", dim}, {"keepdim", false}}, {&x});
      EXPECT_TRUE(same_bits(n.run(*n.native, {&x})[0], n.run(*n.via_f32, {&x})[0]));
    }
}

// An integer dtype attr goes through the float32 twin (the op stays Native).
TEST(Bf16Reduce, IntegerDtypeGoesThroughFloat32) {
  std::mt19937 rng(23);
  HostTensor x = random_bf16({4, 10}, rng, -20.f, 20.f);
  Bf16Node n(ts::opname::sum_dim, {{"dim", {1}}, {"keepdim", false}, {"dtype", "int64"}}, {&x});
  const std::vector<HostTensor> got = n.run(*n.native, {&x}), want = n.run(*n.via_f32, {&x});
  ASSERT_EQ(got[0].view.dtype, DType::I64);
  EXPECT_TRUE(same_bits(got[0], want[0]));
}

}  // namespace

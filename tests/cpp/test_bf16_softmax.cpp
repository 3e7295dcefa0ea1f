// Softmax and log_softmax (and their gradients) on bfloat16 lines
// (Bf16::Native) against the same node's float32 kernel on the same inputs,
// rounded once (make_kernel's ViaFloat32 form). The bfloat16 kernels widen
// each line and run the float32 line routines, so the two agree bit for bit
// (NaN with NaN), but for log_softmax along the last dim: there log(sum) is
// rounded to bfloat16 too, as torch's kernel does (the oracle suite checks
// those bits against torch), so it stays within an ulp of the twin.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bf16_test_util.h"
#include "isa_levels.h"
#include "ops/op.h"
#include "ops/softmax.h"
#include "trainstep/bfloat16.h"

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

namespace {

using bf16_test::Bf16Node;
using bf16_test::random_bf16;

::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want) {
  const int64_t n = want.view.numel();
  if (got.view.type() != want.view.type() || want.view.dtype != DType::BF16)
    return ::testing::AssertionFailure() << "types " << got.view.type().str() << " and "
                                         << want.view.type().str();
  const uint16_t* g = got.view.as<uint16_t>();
  const uint16_t* w = want.view.as<uint16_t>();
  for (int64_t i = 0; i < n; ++i) {
    const float a = ts::bf16_to_float(g[i]), b = ts::bf16_to_float(w[i]);
    if (g[i] != w[i] && !(std::isnan(a) && std::isnan(b)))
      return ::testing::AssertionFailure() << "at " << i << " of " << want.view.type().str()
                                           << ": got " << a << ", want " << b;
  }
  return ::testing::AssertionSuccess();
}

// Within one bfloat16 step of want, or within atol of it (NaN with NaN,
// infinities exact).
::testing::AssertionResult within(const HostTensor& got, const HostTensor& want, double atol) {
  const int64_t n = want.view.numel();
  const uint16_t* g = got.view.as<uint16_t>();
  const uint16_t* w = want.view.as<uint16_t>();
  auto ordered = [](uint16_t b) { return b & 0x8000 ? -int32_t(b & 0x7FFF) : int32_t(b); };
  for (int64_t i = 0; i < n; ++i) {
    const float a = ts::bf16_to_float(g[i]), b = ts::bf16_to_float(w[i]);
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      if (!(std::isnan(a) && std::isnan(b)) && g[i] != w[i])
        return ::testing::AssertionFailure() << "at " << i << ": got " << a << ", want " << b;
    } else if (std::abs(ordered(g[i]) - ordered(w[i])) > 1 && std::abs(double(a) - b) > atol) {
      return ::testing::AssertionFailure() << "at " << i << ": got " << a << ", want " << b
                                           << " (more than an ulp and " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// log_softmax along the last dim rounds log(sum) (softmax.cpp, log_sum_bf16):
// every output moves by up to half an ulp of log(sum) <= log(R) + 1, 2^-8
// of it. Elsewhere the twin's bits.
::testing::AssertionResult matches_twin(const char* op, const Shape& s, int64_t dim,
                                        const HostTensor& got, const HostTensor& twin) {
  const int64_t r = static_cast<int64_t>(s.size());
  if (std::string(op) != ts::opname::log_softmax || r == 0 || (dim + r) % r != r - 1)
    return same_bits(got, twin);
  return within(got, twin, std::ldexp(std::log(double(s.back())) + 1.0, -8));
}

// Every k-th element -inf (masked attention); k = 0: none.
void mask(HostTensor& t, int64_t k) {
  if (k <= 0) return;
  uint16_t* p = t.view.as<uint16_t>();
  for (int64_t i = 0; i < t.view.numel(); i += k) p[i] = ts::float_to_bf16(-INFINITY);
}

struct Case {
  Shape shape;
  int64_t dim;
  int64_t mask_every;
};

const std::vector<Case> kCases = {
    {{32, 4, 64, 64}, -1, 3},  // the transformer's attention, parallel lines
    {{5, 7}, 1, 0},
    {{3, 11, 6}, 1, 4},    // strided lines
    {{2, 9, 5}, 0, 0},     // strided, O = 1
    {{4, 70000}, -1, 5},   // long lines
    {{70000, 3}, 0, 0},    // long strided lines
    {{}, 0, 0},            // 0-d
    {{6, 1, 3}, 1, 0},     // lines of one
};

TEST(Bf16Softmax, ForwardMatchesFloat32Twin) {
  // Contiguous lines have vector forms per ISA level: every level runs.
  isatest::for_each_isa([](ts::CpuIsa) {
  std::mt19937 rng(11);
  for (const char* op : {ts::opname::softmax, ts::opname::log_softmax})
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(op) + " " + (ts::TensorType{DType::BF16, c.shape}).str() + " dim " +
                   std::to_string(c.dim));
      HostTensor x = random_bf16(c.shape, rng, -8.f, 8.f);
      mask(x, c.mask_every);
      const json attrs = {{"dim", c.dim}, {"half_to_float", false}};
      Bf16Node n(op, attrs, {&x});
      auto got = n.run(*n.native, {&x}), twin = n.run(*n.via_f32, {&x});
      EXPECT_TRUE(matches_twin(op, c.shape, c.dim, got[0], twin[0]));
    }
  });
}

// Contiguous lines with zeros of both signs, NaN, infinities and lengths
// that leave vector tails; a line whose only finite element is +-0 makes
// log_softmax's result that zero, sign included.
TEST(Bf16Softmax, ForwardSpecialValuesMatchFloat32Twin) {
  isatest::for_each_isa([](ts::CpuIsa) {
    std::mt19937 rng(13);
    const uint16_t special[] = {0x0000, 0x8000, 0x7FC0, 0x7F80, 0xFF80};
    for (const char* op : {ts::opname::softmax, ts::opname::log_softmax})
      for (int64_t R : {1, 15, 17, 37, 64, 100}) {
        SCOPED_TRACE(std::string(op) + " R " + std::to_string(R));
        HostTensor x = random_bf16({12, R}, rng, -4.f, 4.f);
        uint16_t* p = x.view.as<uint16_t>();
        for (int64_t i = 0; i < 6 * R; ++i)  // the first six lines: specials scattered
          if (rng() % 3 == 0) p[i] = special[rng() % 5];
        for (int64_t r = 0; r < R; ++r) {  // lines 6, 7: one zero among -inf
          p[6 * R + r] = r == R / 2 ? 0x8000 : 0xFF80;
          p[7 * R + r] = r == R / 3 ? 0x0000 : 0xFF80;
        }
        const json attrs = {{"dim", -1}, {"half_to_float", false}};
        Bf16Node n(op, attrs, {&x});
        auto got = n.run(*n.native, {&x}), twin = n.run(*n.via_f32, {&x});
        EXPECT_TRUE(matches_twin(op, {12, R}, -1, got[0], twin[0]));
      }
  });
}

TEST(Bf16Softmax, BackwardMatchesFloat32Twin) {
  std::mt19937 rng(12);
  const struct {
    const char* bwd;
    const char* fwd;
  } ops[] = {{ts::opname::softmax_backward, ts::opname::softmax},
             {ts::opname::log_softmax_backward, ts::opname::log_softmax}};
  for (const auto& o : ops)
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(o.bwd) + " " + (ts::TensorType{DType::BF16, c.shape}).str() + " dim " +
                   std::to_string(c.dim));
      // The output a forward node gives (with masked zeros / -inf), and a gradient.
      HostTensor x = random_bf16(c.shape, rng, -8.f, 8.f);
      mask(x, c.mask_every);
      Bf16Node f(o.fwd, {{"dim", c.dim}, {"half_to_float", false}}, {&x});
      HostTensor y = std::move(f.run(*f.native, {&x})[0]);
      HostTensor g = random_bf16(c.shape, rng, -2.f, 2.f);
      const json attrs = {{"dim", c.dim}, {"input_dtype", "bfloat16"}};
      Bf16Node n(o.bwd, attrs, {&g, &y});
      EXPECT_TRUE(same_bits(n.run(*n.native, {&g, &y})[0], n.run(*n.via_f32, {&g, &y})[0]));
    }
}

}  // namespace

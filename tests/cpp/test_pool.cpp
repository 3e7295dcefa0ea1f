// aten.max_pool2d_with_indices(+_backward) against a naive reference and a few
// results taken from PyTorch 1.13 (NaN, -inf, ceil_mode).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "isa_levels.h"
#include "op_test_util.h"
#include "conv_ref.h"
#include "ops/pool.h"
#include "trainstep/bfloat16.h"
#include "test_util.h"

using namespace ts_test;
using ts::DType;
using ts::HostTensor;

namespace {

uint8_t pd_pass() { return ts::pool_detail::kCodePass; }

const char* kFwd = "aten.max_pool2d_with_indices.default";
const char* kBwd = "aten.max_pool2d_with_indices_backward.default";

struct PoolCase {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
  json attrs() const {
    return {{"kernel_size", {kh, kw}}, {"stride", {sh, sw}}, {"padding", {ph, pw}},
            {"dilation", {dh, dw}}, {"ceil_mode", ceil}};
  }
};

int64_t ref_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  double v = double(in + 2 * p - d * (k - 1) - 1) / s;
  int64_t o = int64_t(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// Naive reference over kernel offsets; the first in-bounds element starts the
// scan, a strictly larger value or a NaN replaces it.
void ref_pool(const PoolCase& c, const float* x, std::vector<float>& y, std::vector<int64_t>& ix) {
  int64_t OH = ref_out(c.H, c.kh, c.ph, c.sh, c.dh, c.ceil), OW = ref_out(c.W, c.kw, c.pw, c.sw, c.dw, c.ceil);
  y.clear();
  ix.clear();
  for (int64_t p = 0; p < c.N * c.C; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        bool first = true;
        float best = 0;
        int64_t bi = -1;
        for (int64_t i = 0; i < c.kh; ++i)
          for (int64_t j = 0; j < c.kw; ++j) {
            int64_t h = oh * c.sh - c.ph + i * c.dh, w = ow * c.sw - c.pw + j * c.dw;
            if (h < 0 || h >= c.H || w < 0 || w >= c.W) continue;
            float v = x[p * c.H * c.W + h * c.W + w];
            if (first || v > best || std::isnan(v)) best = v, bi = h * c.W + w, first = false;
          }
        y.push_back(best);
        ix.push_back(bi);
      }
}

void check_case(const PoolCase& c, uint32_t seed, bool ties) {
  std::mt19937 rng(seed);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
  if (ties)  // few distinct values, so first-max-wins matters
    for (int64_t i = 0; i < x.view.numel(); ++i) x.view.as<float>()[i] = std::round(x.view.as<float>()[i] * 2);
  std::vector<float> y;
  std::vector<int64_t> ix;
  ref_pool(c, f32(x), y, ix);
  std::vector<ts::TensorType> types;
  auto out = run_op(kFwd, c.attrs(), {&x}, &types);
  int64_t OH = ref_out(c.H, c.kh, c.ph, c.sh, c.dh, c.ceil), OW = ref_out(c.W, c.kw, c.pw, c.sw, c.dw, c.ceil);
  ASSERT_EQ(types[0].shape, (ts::Shape{c.N, c.C, OH, OW}));
  ASSERT_EQ(types[1].dtype, DType::I64);
  EXPECT_TRUE(all_close(out[0], y, 0, 0));
  ASSERT_EQ(0, std::memcmp(out[1].view.data, ix.data(), ix.size() * 8));

  HostTensor go = random_f32(types[0].shape, rng);
  std::vector<float> gi(x.view.numel(), 0.f);
  for (size_t o = 0; o < ix.size(); ++o) gi[(o / (OH * OW)) * c.H * c.W + ix[o]] += f32(go)[o];
  auto g = run_op(kBwd, c.attrs(), {&go, &x, &out[1]});
  EXPECT_TRUE(all_close(g[0], gi, 1e-5f, 1e-6f));
}

}  // namespace

TEST(MaxPool, FixedAndRandomCases) {
  std::vector<PoolCase> cases = {
      {64, 32, 24, 24, 2, 2, 2, 2, 0, 0, 1, 1, false},  // the model's pool
      {1, 1, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, true},
      {2, 3, 7, 9, 3, 2, 1, 2, 1, 1, 2, 1, false},       // overlapping, dilation
      {1, 2, 6, 6, 2, 2, 2, 2, 1, 1, 1, 1, true},
      {3, 1, 11, 8, 4, 3, 3, 2, 2, 1, 1, 2, true},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) check_case(c, seed++, false);
  std::mt19937 rng(77);
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int t = 0; t < 40; ++t) {
    PoolCase c;
    c.N = r(1, 3), c.C = r(1, 3), c.kh = r(1, 4), c.kw = r(1, 4), c.sh = r(1, 3), c.sw = r(1, 3);
    c.ph = r(0, c.kh / 2), c.pw = r(0, c.kw / 2), c.dh = r(1, 2), c.dw = r(1, 2), c.ceil = r(0, 1);
    c.H = c.dh * (c.kh - 1) + r(1, 8), c.W = c.dw * (c.kw - 1) + r(1, 8);
    SCOPED_TRACE("random case " + std::to_string(t));
    check_case(c, 200 + t, t % 2);
  }
}

TEST(MaxPool, MatchesPyTorchOnNanAndInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  HostTensor x(DType::F32, {1, 1, 4, 4});
  float v[16] = {1, nan, 3, nan, 5, 5, 0, 1, -inf, -inf, 2, 2, -inf, -inf, 2, 7};
  std::memcpy(x.view.data, v, sizeof v);
  json a = {{"kernel_size", {2, 2}}, {"stride", {2, 2}}, {"padding", {0, 0}}, {"dilation", {1, 1}},
            {"ceil_mode", false}};
  auto out = run_op(kFwd, a, {&x});
  const float* y = f32(out[0]);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
  EXPECT_EQ(y[2], -inf);
  EXPECT_EQ(y[3], 7.f);
  const int64_t* ix = out[1].view.as<int64_t>();
  EXPECT_EQ((std::vector<int64_t>(ix, ix + 4)), (std::vector<int64_t>{1, 3, 8, 15}));
}

TEST(MaxPool, MatchesPyTorchCeilModeAndEmptyStride) {
  HostTensor x(DType::F32, {1, 1, 5, 5});
  for (int i = 0; i < 25; ++i) x.view.as<float>()[i] = float(i);
  json a = {{"kernel_size", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}}, {"dilation", {1, 1}},
            {"ceil_mode", true}};
  auto out = run_op(kFwd, a, {&x});
  const int64_t* ix = out[1].view.as<int64_t>();
  EXPECT_EQ((std::vector<int64_t>(ix, ix + 9)), (std::vector<int64_t>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  // Empty stride means stride = kernel_size; the ceil rule drops a window
  // that would start in the right padding.
  json b = {{"kernel_size", {2}}, {"stride", json::array()}, {"padding", {1}}, {"dilation", {1}},
            {"ceil_mode", true}};
  auto t = infer_op(kFwd, b, {{DType::F32, {1, 1, 6, 6}}});
  EXPECT_EQ(t[0].shape, (ts::Shape{1, 1, 4, 4}));
  t = infer_op(kFwd, b, {{DType::F32, {3, 5, 5}}});
  EXPECT_EQ(t[0].shape, (ts::Shape{3, 3, 3}));
}

TEST(MaxPool, RunTwiceIsIdentical) {
  PoolCase c{2, 3, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, false};  // overlapping windows accumulate
  std::mt19937 rng(4);
  HostTensor x = random_f32({c.N, c.C, c.H, c.W}, rng);
  OpHarness f(kFwd, c.attrs(), {&x});
  auto y1 = f.run({&x}), y2 = f.run({&x});
  EXPECT_EQ(0, std::memcmp(y1[1].view.data, y2[1].view.data, y1[1].view.nbytes()));
  HostTensor go = random_f32(y1[0].view.shape, rng);
  OpHarness b(kBwd, c.attrs(), {&go, &x, &y1[1]});
  auto g1 = b.run({&go, &x, &y1[1]});
  std::vector<ts::HostTensor> g2 = b.run({&go, &x, &y1[1]});
  b.run_into({&go, &x, &y1[1]}, g2);  // same buffer again: must be re-zeroed, not accumulated
  EXPECT_EQ(0, std::memcmp(f32(g1[0]), f32(g2[0]), g1[0].view.nbytes()));
}

TEST(MaxPool, Errors) {
  auto T = [](ts::Shape s, DType d = DType::F32) { return ts::TensorType{d, s}; };
  json a = {{"kernel_size", {3, 3}}, {"stride", {2, 2}}, {"padding", {2, 2}}, {"dilation", {1, 1}},
            {"ceil_mode", false}};
  EXPECT_EQ(infer_error(kFwd, a, {T({1, 1, 5, 5})}),
            "node 'n0' (aten.max_pool2d_with_indices.default): padding must be between 0 and half "
            "the kernel size, got padding 2x2 for kernel 3x3");
  a["padding"] = {0, 0};
  EXPECT_EQ(infer_error(kFwd, a, {T({1, 1, 2, 5})}),
            "node 'n0' (aten.max_pool2d_with_indices.default): output size is not positive: input "
            "float32[1, 1, 2, 5], kernel 3x3, padding 0x0, dilation 1x1 give output 0x2");
  EXPECT_EQ(infer_error(kFwd, a, {T({5, 5})}),
            "node 'n0' (aten.max_pool2d_with_indices.default): input must be rank 3 (C, H, W) or 4 "
            "(N, C, H, W), got float32[5, 5]");
  EXPECT_EQ(infer_error(kFwd, a, {T({1, 1, 5, 5}, DType::I64)}),
            "node 'n0' (aten.max_pool2d_with_indices.default): only float32, float64 and bfloat16 are "
            "supported, got int64[1, 1, 5, 5]");
  a["kernel_size"] = {0, 3};
  EXPECT_EQ(infer_error(kFwd, a, {T({1, 1, 5, 5})}),
            "node 'n0' (aten.max_pool2d_with_indices.default): kernel_size must be positive, got 0x3");
  a["kernel_size"] = {3, 3};
  EXPECT_EQ(infer_error(kBwd, a, {T({1, 1, 2, 2}), T({1, 1, 5, 5}), T({1, 1, 2, 2}, DType::F32)}),
            "node 'n0' (aten.max_pool2d_with_indices_backward.default): indices must be "
            "int64[1, 1, 2, 2], got float32[1, 1, 2, 2]");
  EXPECT_EQ(infer_error(kBwd, a, {T({1, 1, 3, 2}), T({1, 1, 5, 5}), T({1, 1, 2, 2}, DType::I64)}),
            "node 'n0' (aten.max_pool2d_with_indices_backward.default): grad_output must be "
            "float32[1, 1, 2, 2], got float32[1, 1, 3, 2]");
}

// At every ISA level (isa_levels.h): the AVX-512 path for 2x2, and the
// portable loops.
TEST(MaxPool, TiledFastPathMatchesGeneralPath) {
  namespace pd = ts::pool_detail;
  isatest::for_each_isa([](ts::CpuIsa) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::mt19937 rng(31);
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    int tested = 0;
    for (int t = 0; t < 60; ++t) {
      pd::PoolGeom g{};
      g.planes = r(1, 5);
      g.kh = t % 3 == 0 ? 2 : r(1, 4);  // 2x2 (templated) and general tiling sizes
      g.kw = t % 3 == 0 ? 2 : r(1, 4);
      g.sh = g.kh, g.sw = g.kw, g.dh = g.dw = 1, g.ph = g.pw = 0;
      g.H = g.kh * r(1, 6) + r(0, g.kh - 1);  // a remainder row/column no window covers
      g.W = g.kw * r(1, t % 3 == 0 ? 40 : 9) + r(0, g.kw - 1);  // 2x2: rows of 1..40 outputs
      g.OH = g.H / g.kh, g.OW = g.W / g.kw;
      ASSERT_TRUE(pd::max_pool_tiles(g));
      int64_t n = g.planes * g.H * g.W, no = g.planes * g.OH * g.OW;
      std::vector<float> x(n);
      int mode = t % 4;  // 0: random, 1: ties, 2: with -inf, 3: with NaN and -inf
      for (auto& v : x) {
        v = std::uniform_real_distribution<float>(-1, 1)(rng);
        if (mode == 1) v = std::round(v * 2);
        if (mode >= 2 && r(0, 3) == 0) v = -inf;
        if (mode == 3 && r(0, 4) == 0) v = nan;
      }
      std::vector<float> y1(no), y2(no);
      std::vector<int64_t> i1(no), i2(no);
      pd::max_pool_general(g, x.data(), y1.data(), i1.data());
      pd::max_pool_tiled(g, x.data(), y2.data(), i2.data());
      SCOPED_TRACE("case " + std::to_string(t));
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), no * 4));  // bitwise, NaN included
      EXPECT_EQ(i1, i2);
      ++tested;
    }
    EXPECT_EQ(tested, 60);
  });
  // Not tiling: overlap, padding, dilation, a clipped ceil-mode window.
  pd::PoolGeom g{1, 6, 6, 3, 3, 2, 2, 2, 2, 0, 0, 1, 1, {}};
  EXPECT_TRUE(pd::max_pool_tiles(g));
  auto h = g;
  h.sh = 1;
  EXPECT_FALSE(pd::max_pool_tiles(h));
  h = g, h.ph = 1;
  EXPECT_FALSE(pd::max_pool_tiles(h));
  h = g, h.dw = 2;
  EXPECT_FALSE(pd::max_pool_tiles(h));
  h = g, h.W = 5;  // ceil mode: last window would be clipped
  EXPECT_FALSE(pd::max_pool_tiles(h));
}

// The code pair's kernels for any geometry and layout (pool_code.cpp)
// against the general path: the same values bit for bit (NaN, ties and
// -inf included), codes that name the general path's argmax, and a
// backward that adds grad_output at each passing argmax in output order.
TEST(MaxPoolCode, AnyGeometryAndLayoutMatchTheGeneralPath) {
  namespace pd = ts::pool_detail;
  std::mt19937 rng(41);
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int t = 0; t < 40; ++t) {
    PoolCase c{2, 16, r(3, 11), r(3, 11), r(1, 3), r(1, 3), r(1, 3), r(1, 3), 0, 0, r(1, 2), r(1, 2),
               t % 3 == 0};
    if (t == 0) c = {2, 16, 12, 12, 3, 3, 2, 2, 1, 1, 1, 1, false};  // torchvision's ResNet stem
    c.ph = r(0, c.kh / 2), c.pw = r(0, c.kw / 2);
    pd::PoolGeom g{};
    g.planes = c.N * c.C, g.H = c.H, g.W = c.W, g.kh = c.kh, g.kw = c.kw, g.sh = c.sh, g.sw = c.sw;
    g.ph = c.ph, g.pw = c.pw, g.dh = c.dh, g.dw = c.dw;
    g.OH = ref_out(c.H, c.kh, c.ph, c.sh, c.dh, c.ceil), g.OW = ref_out(c.W, c.kw, c.pw, c.sw, c.dw, c.ceil);
    if (g.OH < 1 || g.OW < 1) continue;
    SCOPED_TRACE("case " + std::to_string(t) + ": " + c.attrs().dump());
    HostTensor x(DType::F32, {c.N, c.C, c.H, c.W}), go(DType::F32, {c.N, c.C, g.OH, g.OW});
    for (int64_t i = 0; i < x.view.numel(); ++i) {
      float v = std::uniform_real_distribution<float>(-1, 1)(rng);
      if (t % 4 == 1) v = std::round(v * 2);  // ties and zeros
      if (t % 4 >= 2 && r(0, 5) == 0) v = -inf;
      if (t % 4 == 3 && r(0, 7) == 0) v = nan;
      x.view.as<float>()[i] = v;
    }
    for (int64_t i = 0; i < go.view.numel(); ++i)
      go.view.as<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
    const int64_t no = go.view.numel();
    std::vector<float> y_ref(no);
    std::vector<int64_t> idx(no);
    pd::max_pool_general(g, f32(x), y_ref.data(), idx.data());
    std::vector<uint8_t> code_ref(no);
    HostTensor gi_ref(DType::F32, x.view.shape);
    for (int64_t o = 0; o < no; ++o) {
      const int64_t p = o / (g.OH * g.OW), oh = o / g.OW % g.OH, ow = o % g.OW;
      const int64_t h = idx[o] / g.W, w = idx[o] % g.W;
      const int64_t i = (h - (oh * g.sh - g.ph)) / g.dh, j = (w - (ow * g.sw - g.pw)) / g.dw;
      const bool pass = !(y_ref[o] <= 0.f);
      code_ref[o] = static_cast<uint8_t>(i * g.kw + j + (pass ? pd::kCodePass : 0));
      if (pass) gi_ref.view.as<float>()[p * g.H * g.W + idx[o]] += f32(go)[o];
    }
    for (int64_t xb : {1, 8, 16})
      for (int64_t yb : {1, 8, 16}) {
        SCOPED_TRACE("blocks " + std::to_string(xb) + " " + std::to_string(yb));
        HostTensor xin = to_blocked(x, xb);  // block 1: a plain copy
        HostTensor y(DType::F32, go.view.shape);
        std::vector<uint8_t> code(no);
        pd::max_pool_code_any(g, c.C, xb, yb, f32(xin), y.view.as<float>(), code.data());
        HostTensor yp = from_blocked(y, yb);
        ASSERT_EQ(0, std::memcmp(f32(yp), y_ref.data(), no * 4));
        ASSERT_EQ(code, code_ref);
        // The backward, grad_output in xb's layout, grad_input in yb's.
        HostTensor gin = to_blocked(go, xb);
        HostTensor gi(DType::F32, x.view.shape);
        std::fill(gi.view.as<float>(), gi.view.as<float>() + gi.view.numel(), nan);  // all written
        ASSERT_EQ(0, pd::max_pool_code_any_backward(g, c.C, xb, yb, f32(gin), code.data(),
                                                    gi.view.as<float>()));
        HostTensor gp = from_blocked(gi, yb);
        ASSERT_EQ(0, std::memcmp(f32(gp), f32(gi_ref), gi.view.nbytes()));
      }
  }
}

// Codes are a program's bytes: one past its window, or one that names a
// padding element, fails naming the node instead of writing outside the
// input.
TEST(MaxPoolCode, CodesOutsideTheInputAreRefused) {
  const json attrs = {{"kernel_size", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}},
                      {"dilation", {1, 1}}, {"ceil_mode", false}, {"input_size", {6, 6}}};
  std::mt19937 rng(3);
  HostTensor g = random_f32({1, 2, 3, 3}, rng);
  for (uint8_t bad : {uint8_t(pd_pass() | 9), uint8_t(pd_pass() | 0)}) {
    HostTensor code(DType::U8, {1, 2, 3, 3});
    for (int64_t i = 0; i < 18; ++i) code.view.as<uint8_t>()[i] = pd_pass() | 4;  // the centre
    code.view.as<uint8_t>()[0] = bad;  // window (0, 0): offset 9 is past it, 0 is padding
    const std::string e = error_of([&] { run_op("trainstep.max_pool2d_code_backward", attrs, {&g, &code}); });
    EXPECT_NE(e.find("node 'n0' (trainstep.max_pool2d_code_backward): 1 window codes name no "
                     "element of the input"), std::string::npos) << e;
  }
}

namespace {

// NCHW <-> NHWC of bfloat16 bits.
std::vector<uint16_t> nhwc_of(const std::vector<uint16_t>& x, int64_t N, int64_t C, int64_t HW, bool to_nhwc) {
  std::vector<uint16_t> r(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < HW; ++s) {
        const int64_t plain = (n * C + c) * HW + s, last = (n * HW + s) * C + c;
        r[to_nhwc ? last : plain] = x[to_nhwc ? plain : last];
      }
  return r;
}

bool same_value(float a, float b) { return (a != a && b != b) || std::memcmp(&a, &b, 4) == 0; }

}  // namespace

// The bfloat16 code pair against the float32 one on the widened values
// (widening is exact, so every value, code and gradient must agree; NaN as
// NaN), plain and channels-last, on windows that do not overlap: ties,
// zeros, -inf, NaN, padding, dilation, remainder rows.
TEST(MaxPoolCode, Bfloat16MatchesFloat32OnWidenedValues) {
  namespace pd = ts::pool_detail;
  std::mt19937 rng(43);
  auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int ran = 0;
  for (int t = 0; t < 40; ++t) {
    pd::PoolGeom g{};
    const int64_t N = 2, C = r(1, 20);
    g.planes = N * C, g.H = r(3, 11), g.W = r(3, 11), g.kh = r(1, 3), g.kw = r(1, 3);
    g.dh = r(1, 2), g.dw = r(1, 2);
    g.sh = (g.kh - 1) * g.dh + 1 + r(0, 1), g.sw = (g.kw - 1) * g.dw + 1 + r(0, 1);  // no overlap
    g.ph = r(0, g.kh / 2), g.pw = r(0, g.kw / 2);
    g.OH = ref_out(g.H, g.kh, g.ph, g.sh, g.dh, false), g.OW = ref_out(g.W, g.kw, g.pw, g.sw, g.dw, false);
    if (g.OH < 1 || g.OW < 1) continue;
    ASSERT_FALSE(pd::windows_overlap(g));
    ++ran;
    SCOPED_TRACE("case " + std::to_string(t));
    const int64_t ni = g.planes * g.H * g.W, no = g.planes * g.OH * g.OW;
    std::vector<uint16_t> xb(ni), gob(no);
    std::vector<float> xf(ni), gof(no);
    for (int64_t i = 0; i < ni; ++i) {
      float v = std::uniform_real_distribution<float>(-1, 1)(rng);
      if (t % 4 == 1) v = std::round(v * 2);  // ties and zeros
      if (t % 4 >= 2 && r(0, 5) == 0) v = -inf;
      if (t % 4 == 3 && r(0, 7) == 0) v = nan;
      xb[i] = ts::float_to_bf16(v);
      xf[i] = ts::bf16_to_float(xb[i]);
    }
    for (int64_t o = 0; o < no; ++o) {
      gob[o] = ts::float_to_bf16(std::uniform_real_distribution<float>(-1, 1)(rng));
      gof[o] = ts::bf16_to_float(gob[o]);
    }
    std::vector<float> y_ref(no), gi_ref(ni);
    std::vector<uint8_t> code_ref(no);
    pd::max_pool_code_any(g, C, 1, 1, xf.data(), y_ref.data(), code_ref.data());
    ASSERT_EQ(0, pd::max_pool_code_any_backward(g, C, 1, 1, gof.data(), code_ref.data(), gi_ref.data()));
    for (const bool last : {false, true}) {
      SCOPED_TRACE(last ? "nhwc" : "plain");
      const int64_t blk = last ? C : 1;
      const std::vector<uint16_t> xin = last ? nhwc_of(xb, N, C, g.H * g.W, true) : xb;
      std::vector<uint16_t> y(no);
      std::vector<uint8_t> code(no);
      pd::max_pool_code_any(g, C, blk, blk, xin.data(), y.data(), code.data());
      if (last) y = nhwc_of(y, N, C, g.OH * g.OW, false);
      for (int64_t o = 0; o < no; ++o)
        ASSERT_TRUE(same_value(ts::bf16_to_float(y[o]), y_ref[o])) << "value " << o;
      ASSERT_EQ(code, code_ref);
      const std::vector<uint16_t> gin = last ? nhwc_of(gob, N, C, g.OH * g.OW, true) : gob;
      std::vector<uint16_t> gi(ni, 0x7FC0);  // all written
      ASSERT_EQ(0, pd::max_pool_code_any_backward(g, C, blk, blk, gin.data(), code.data(), gi.data()));
      if (last) gi = nhwc_of(gi, N, C, g.H * g.W, false);
      for (int64_t i = 0; i < ni; ++i)
        ASSERT_TRUE(same_value(ts::bf16_to_float(gi[i]), gi_ref[i])) << "gradient " << i;
    }
  }
  EXPECT_GT(ran, 20);
}

// Overlapping bfloat16 windows would add gradients in bfloat16: the code
// pair refuses them (the pass leaves such a pool unfused).
TEST(MaxPoolCode, Bfloat16RefusesOverlappingWindows) {
  const json attrs = {{"kernel_size", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}},
                      {"dilation", {1, 1}}, {"ceil_mode", false}};
  HostTensor x(DType::BF16, {1, 2, 6, 6});
  std::fill(x.view.as<uint16_t>(), x.view.as<uint16_t>() + x.view.numel(), uint16_t{0});
  const std::string e = error_of([&] { run_op("trainstep.max_pool2d_code", attrs, {&x}); });
  EXPECT_NE(e.find("bfloat16 windows must not overlap"), std::string::npos) << e;
}

// The op plans every backend shares (src/ops/*.h): each checked on random
// shapes against a naive computation over the original, unmerged shape.
#include <gtest/gtest.h>

#include <random>

#include "ops/avg_pool.h"
#include "ops/conv_transpose.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "ops/softmax.h"

namespace {

using ts::NodeCtx;
using ts::Shape;
using ts::TensorType;
using json = nlohmann::json;

// NodeCtx keeps a reference to attrs: the caller keeps them alive.
NodeCtx node(const json& attrs, const std::vector<TensorType>& in) {
  return NodeCtx("n0", "test", attrs, in, std::vector<bool>(in.size(), true));
}

// Row-major multi-index of flat index i in shape s.
std::vector<int64_t> unflat(int64_t i, const Shape& s) {
  std::vector<int64_t> id(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    id[d] = i % s[d];
    i /= s[d];
  }
  return id;
}

Shape random_shape(std::mt19937& g, int max_rank, int64_t max_dim) {
  Shape s(std::uniform_int_distribution<int>(0, max_rank)(g));
  for (auto& d : s) d = std::uniform_int_distribution<int64_t>(1, max_dim)(g);
  if (!s.empty() && g() % 16 == 0) s[g() % s.size()] = 0;
  return s;
}

// ---- reduce ----

// Sums over the plan: [O, R, I], or the general form's kept and reduced
// dims by their strides.
std::vector<int64_t> sum_by_plan(const ts::ReducePlan& p, const std::vector<int64_t>& x) {
  std::vector<int64_t> out(p.out_numel, 0);
  if (!p.general) {
    for (int64_t o = 0; o < p.O; ++o)
      for (int64_t r = 0; r < p.R; ++r)
        for (int64_t i = 0; i < p.I; ++i) out[o * p.I + i] += x[(o * p.R + r) * p.I + i];
    return out;
  }
  const Shape ks(p.kshape, p.kshape + p.nk), rs(p.rshape, p.rshape + p.nr);
  for (int64_t k = 0; k < ts::shape_numel(ks); ++k) {
    int64_t base = 0;
    auto kid = unflat(k, ks);
    for (int d = 0; d < p.nk; ++d) base += kid[d] * p.kstride[d];
    for (int64_t r = 0; r < ts::shape_numel(rs); ++r) {
      auto rid = unflat(r, rs);
      int64_t at = base;
      for (int d = 0; d < p.nr; ++d) at += rid[d] * p.rstride[d];
      out[k] += x[at];
    }
  }
  return out;
}

std::vector<int64_t> naive_sum(const Shape& s, const std::vector<bool>& red,
                               const std::vector<int64_t>& x) {
  Shape os;
  for (size_t d = 0; d < s.size(); ++d)
    if (!red[d]) os.push_back(s[d]);
  std::vector<int64_t> out(ts::shape_numel(os), 0);
  for (int64_t i = 0; i < ts::shape_numel(s); ++i) {
    auto id = unflat(i, s);
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d)
      if (!red[d]) o = o * s[d] + id[d];
    out[o] += x[i];
  }
  return out;
}

TEST(OpPlans, ReducePlanMatchesNaiveSum) {
  std::mt19937 g(7);
  int general = 0, rows = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Shape s = random_shape(g, 6, 4);
    json dims = json::array();
    for (size_t d = 0; d < s.size(); ++d)
      if (g() % 2) dims.push_back(g() % 2 ? int64_t(d) : int64_t(d) - int64_t(s.size()));
    const json attrs = {{"dim", dims}};
    NodeCtx n = node(attrs, {{ts::DType::F32, s}});
    const std::vector<bool> red = ts::reduced_dims(n, s);
    ASSERT_EQ(red.size(), s.size());
    if (dims.empty()) {
      for (bool r : red) EXPECT_TRUE(r);
    }
    std::vector<int64_t> x(ts::shape_numel(s));
    for (auto& v : x) v = std::uniform_int_distribution<int64_t>(-1000, 1000)(g);
    const ts::ReducePlan p = ts::reduce_plan(n, s, red);
    (p.general ? general : rows)++;
    EXPECT_EQ(sum_by_plan(p, x), naive_sum(s, red, x)) << ts::shape_str(s) << " dim " << dims;
  }
  EXPECT_GT(general, 50);  // both forms were exercised
  EXPECT_GT(rows, 50);
}

TEST(OpPlans, ReduceDimsRejectsRepeatsAndRange) {
  const Shape s{2, 3, 4};
  const json twice = {{"dim", {1, -2}}}, out_of_range = {{"dim", {3}}};
  NodeCtx rep = node(twice, {{ts::DType::F32, s}});
  EXPECT_THROW(ts::reduced_dims(rep, s), ts::Error);
  NodeCtx far = node(out_of_range, {{ts::DType::F32, s}});
  EXPECT_THROW(ts::reduced_dims(far, s), ts::Error);
}

TEST(OpPlans, ArgmaxPlanMatchesNaiveIndexing) {
  std::mt19937 g(11);
  for (int trial = 0; trial < 300; ++trial) {
    Shape s = random_shape(g, 5, 5);
    for (auto& d : s) d = std::max<int64_t>(d, 1);
    json attrs = json::object();
    int64_t dim = -1;
    if (!s.empty() && g() % 4) {
      dim = static_cast<int64_t>(g() % s.size());
      attrs["dim"] = g() % 2 ? dim : dim - static_cast<int64_t>(s.size());
    }
    NodeCtx n = node(attrs, {{ts::DType::F32, s}});
    const ts::ArgmaxPlan p = ts::argmax_plan(n, s);
    ASSERT_EQ(p.O * p.R * p.I, ts::shape_numel(s));
    // Element (o, r, i) of the plan is the element whose index along dim is r.
    for (int64_t e = 0; e < ts::shape_numel(s); ++e) {
      const int64_t r = (e / p.I) % p.R;
      if (dim >= 0) {
        EXPECT_EQ(r, unflat(e, s)[dim]);
      } else {
        EXPECT_EQ(r, e);
      }
    }
  }
}

TEST(OpPlans, SoftmaxLinesRunAlongDim) {
  std::mt19937 g(29);
  for (int trial = 0; trial < 300; ++trial) {
    const Shape s = random_shape(g, 5, 5);
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t dim = rank ? std::uniform_int_distribution<int64_t>(0, rank - 1)(g) : 0;
    const json attrs = {{"dim", g() % 2 || rank == 0 ? dim : dim - rank}};
    NodeCtx n = node(attrs, {{ts::DType::F32, s}});
    const ts::SoftmaxLines l = ts::softmax_lines(n, s);
    ASSERT_EQ(l.O * l.R * l.I, ts::shape_numel(s));
    // Element (o, r, i) of a line is the one whose index along dim is r.
    for (int64_t e = 0; e < ts::shape_numel(s); ++e)
      EXPECT_EQ((e / l.I) % l.R, rank ? unflat(e, s)[dim] : 0) << ts::shape_str(s) << " dim " << dim;
  }
}

// ---- pooling ----

// Windows along one axis by enumeration: start o * s - pad in input
// coordinates, span d * (k - 1) + 1. Without ceil_mode a window lies inside
// the padded input; with it, one more may run past the end when the one
// before it (o - 1, even o = -1) stopped short of the end, but it must start
// inside the input or the left padding.
int64_t naive_windows(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t span = d * (k - 1) + 1, padded = in + 2 * pad;
  int64_t n = 0;
  for (int64_t o = 0; o * s < padded; ++o) {
    const bool fits = o * s + span <= padded;
    const bool prev_short = (o - 1) * s + span < padded;
    if (fits || (ceil_mode && prev_short && o * s < in + pad)) n = o + 1;
  }
  return n;
}

// The OpDef's inferred types for a node of op over inputs.
std::vector<TensorType> infer(const std::string& op, const json& attrs,
                              const std::vector<TensorType>& in) {
  NodeCtx n("n0", op, attrs, in, std::vector<bool>(in.size(), true));
  return ts::OpRegistry::get().find(op)->infer(n);
}

TEST(OpPlans, MaxPoolGeomMatchesWindowCount) {
  std::mt19937 g(3);
  int tried = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    const Shape x = g() % 2 ? Shape{r(1, 3), r(1, 4), r(1, 12), r(1, 12)} : Shape{r(1, 4), r(1, 12), r(1, 12)};
    const int64_t kh = r(1, 5), kw = r(1, 5);
    const bool ceil_mode = g() % 2;
    const json attrs = {{"kernel_size", {kh, kw}}, {"stride", {r(1, 4), r(1, 4)}},
                        {"padding", {r(0, kh / 2), r(0, kw / 2)}}, {"dilation", {r(1, 3), r(1, 3)}},
                        {"ceil_mode", ceil_mode}};
    const TensorType t{ts::DType::F32, x};
    NodeCtx n = node(attrs, {t});
    const int64_t H = x[x.size() - 2], W = x[x.size() - 1];
    const int64_t oh = naive_windows(H, kh, attrs["padding"][0], attrs["stride"][0], attrs["dilation"][0], ceil_mode);
    const int64_t ow = naive_windows(W, kw, attrs["padding"][1], attrs["stride"][1], attrs["dilation"][1], ceil_mode);
    if (oh < 1 || ow < 1) {
      EXPECT_THROW(ts::max_pool_geom(n, t), ts::Error);
      continue;
    }
    ++tried;
    const ts::PoolGeom p = ts::max_pool_geom(n, t);
    EXPECT_EQ(p.OH, oh) << attrs << " " << ts::shape_str(x);
    EXPECT_EQ(p.OW, ow) << attrs << " " << ts::shape_str(x);
    EXPECT_EQ(p.planes * p.H * p.W, ts::shape_numel(x));
    EXPECT_EQ(p.kh, kh);
    EXPECT_EQ(p.sw, attrs["stride"][1]);
    EXPECT_EQ(p.dh, attrs["dilation"][0]);
    const auto out = infer("aten.max_pool2d_with_indices.default", attrs, {t});
    EXPECT_EQ(out[0].shape, p.out_shape);
  }
  EXPECT_GT(tried, 500);
}

TEST(OpPlans, AvgPoolGeomMatchesWindowCount) {
  std::mt19937 g(5);
  int tried = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    const Shape x{r(1, 3), r(1, 4), r(1, 12), r(1, 12)};
    const int64_t kh = r(1, 5), kw = r(1, 5), divisor = r(-1, 3);
    const bool ceil_mode = g() % 2;
    json attrs = {{"kernel_size", {kh, kw}}, {"stride", g() % 4 ? json{r(1, 4), r(1, 4)} : json::array()},
                  {"padding", {r(0, kh / 2), r(0, kw / 2)}}, {"ceil_mode", ceil_mode},
                  {"count_include_pad", bool(g() % 2)}};
    if (divisor != 0) attrs["divisor_override"] = divisor;
    const TensorType t{ts::DType::F64, x};
    NodeCtx n = node(attrs, {t});
    const int64_t sh = attrs["stride"].empty() ? kh : attrs["stride"][0].get<int64_t>();
    const int64_t sw = attrs["stride"].empty() ? kw : attrs["stride"][1].get<int64_t>();
    const int64_t oh = naive_windows(x[2], kh, attrs["padding"][0], sh, 1, ceil_mode);
    const int64_t ow = naive_windows(x[3], kw, attrs["padding"][1], sw, 1, ceil_mode);
    if (oh < 1 || ow < 1) {
      EXPECT_THROW(ts::avg_pool_geom(n, t), ts::Error);
      continue;
    }
    ++tried;
    const ts::AvgGeom p = ts::avg_pool_geom(n, t);
    EXPECT_EQ(p.OH, oh) << attrs << " " << ts::shape_str(x);
    EXPECT_EQ(p.OW, ow) << attrs << " " << ts::shape_str(x);
    EXPECT_EQ(p.sh, sh);
    EXPECT_EQ(p.sw, sw);
    EXPECT_EQ(p.p.planes, x[0] * x[1]);
    EXPECT_EQ(p.divisor, divisor);
    EXPECT_EQ(p.include_pad, attrs["count_include_pad"].get<bool>());
    EXPECT_EQ(infer("aten.avg_pool2d.default", attrs, {t})[0].shape, p.out_shape);
  }
  EXPECT_GT(tried, 500);
}

TEST(OpPlans, AdaptivePoolGeomFromAttrAndGrad) {
  std::mt19937 g(9);
  for (int trial = 0; trial < 200; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    const Shape x{r(1, 3), r(1, 4), r(1, 9), r(1, 9)};
    const json attrs = {{"output_size", {r(1, 6), r(1, 6)}}};
    const TensorType t{ts::DType::F32, x};
    NodeCtx n = node(attrs, {t});
    const ts::AdaGeom p = ts::adaptive_pool_geom(n, t, nullptr);
    EXPECT_EQ(p.OH, attrs["output_size"][0]);
    EXPECT_EQ(p.OW, attrs["output_size"][1]);
    EXPECT_EQ(p.p.planes * p.p.H * p.p.W, ts::shape_numel(x));
    EXPECT_EQ(infer("aten._adaptive_avg_pool2d.default", attrs, {t})[0].shape, p.out_shape);
    // The backward takes the output size from grad_output.
    const json none = json::object();
    NodeCtx b = node(none, {{ts::DType::F32, p.out_shape}, t});
    const ts::AdaGeom q = ts::adaptive_pool_bwd_geom(b);
    EXPECT_EQ(q.OH, p.OH);
    EXPECT_EQ(q.OW, p.OW);
    EXPECT_EQ(q.out_shape, p.out_shape);
  }
}

// ---- convolution ----

TEST(OpPlans, ConvGeomMatchesWindowCount) {
  std::mt19937 g(13);
  int tried = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    const bool d1 = g() % 3 == 0;
    const int64_t G = r(1, 3), N = r(1, 3), C = G * r(1, 3), O = G * r(1, 3);
    const int64_t H = d1 ? 1 : r(1, 10), W = r(1, 10), KH = d1 ? 1 : r(1, 4), KW = r(1, 4);
    const Shape xs = d1 ? Shape{N, C, W} : Shape{N, C, H, W};
    const Shape ws = d1 ? Shape{O, C / G, KW} : Shape{O, C / G, KH, KW};
    auto hw = [&](int64_t lo, int64_t hi) { return d1 ? json{r(lo, hi)} : json{r(lo, hi), r(lo, hi)}; };
    const json attrs = {{"stride", hw(1, 3)}, {"padding", hw(0, 2)}, {"dilation", hw(1, 2)},
                        {"transposed", false}, {"output_padding", d1 ? json{0} : json{0, 0}},
                        {"groups", G}};
    const TensorType x{ts::DType::F32, xs}, w{ts::DType::F32, ws};
    NodeCtx n = node(attrs, {x, w});
    auto at = [&](const char* k, int i) { return attrs[k][d1 ? 0 : i].get<int64_t>(); };
    const int64_t oh = d1 ? 1 : naive_windows(H, KH, at("padding", 0), at("stride", 0), at("dilation", 0), false);
    const int64_t ow = naive_windows(W, KW, at("padding", 1), at("stride", 1), at("dilation", 1), false);
    if (oh < 1 || ow < 1) {
      EXPECT_THROW(ts::conv_geom(n, 0, 1), ts::Error);
      continue;
    }
    ++tried;
    const ts::ConvGeom c = ts::conv_geom(n, 0, 1);
    EXPECT_EQ(c.OH, oh) << attrs << ts::shape_str(xs) << ts::shape_str(ws);
    EXPECT_EQ(c.OW, ow) << attrs << ts::shape_str(xs) << ts::shape_str(ws);
    EXPECT_EQ(c.nd, d1 ? 1 : 2);
    EXPECT_EQ(c.N * c.C * c.H * c.W, ts::shape_numel(xs));
    EXPECT_EQ(c.O * (c.C / c.G) * c.KH * c.KW, ts::shape_numel(ws));
    EXPECT_EQ(c.sw, at("stride", 1));
    EXPECT_EQ(c.pw, at("padding", 1));
    EXPECT_EQ(c.dw, at("dilation", 1));
    const auto out = infer("aten.convolution.default", attrs, {x, w, {ts::DType::F32, {O}}});
    EXPECT_EQ(out[0].shape, ts::conv_out_shape(c));
  }
  EXPECT_GT(tried, 500);
}

}  // namespace

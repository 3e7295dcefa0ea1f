// The op plans every backend shares (src/ops/*.h): each checked on random
// shapes against a naive computation over the original, unmerged shape.
#include <gtest/gtest.h>

#include <random>

#include "ops/reduce.h"

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

}  // namespace

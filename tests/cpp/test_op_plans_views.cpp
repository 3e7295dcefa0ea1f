// The op facts backends read instead of op names: pointwise op codes
// (OpDef::pointwise), strided views (OpDef::strided_view) and slice/select
// arguments (ops/shape.h), each checked against the CPU kernel's own output.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "op_test_util.h"
#include "ops/shape.h"

namespace {

using ts::DType;
using ts::HostTensor;
using ts::PwCode;
using ts::Shape;
using json = nlohmann::json;

HostTensor random_f64(const Shape& s, std::mt19937& g, double lo, double hi) {
  HostTensor t(DType::F64, s);
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<double>()[i] = d(g);
  return t;
}

HostTensor random_bool(const Shape& s, std::mt19937& g) {
  HostTensor t(DType::Bool, s);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<uint8_t>()[i] = g() % 2;
  return t;
}

double value(const HostTensor& t, int64_t i) {
  switch (t.view.dtype) {
    case DType::F64: return t.view.as<double>()[i];
    case DType::F32: return t.view.as<float>()[i];
    case DType::Bool: return t.view.as<uint8_t>()[i];
    default: ADD_FAILURE() << "unexpected dtype"; return 0;
  }
}

// What each code computes, by its definition in ops/op.h: a, b, c are the
// operands (an attr operand already in b), alpha/lo/hi the attrs.
double reference(PwCode c, double a, double b, double cnd, const json& at) {
  const double alpha = at.value("alpha", 1.0);
  switch (c) {
    case PwCode::Add: return a + alpha * b;
    case PwCode::Sub: return a - alpha * b;
    case PwCode::Mul: return a * b;
    case PwCode::Div: return a / b;
    case PwCode::Max: return std::max(a, b);
    case PwCode::Min: return std::min(a, b);
    case PwCode::Pow: return std::pow(a, b);
    case PwCode::PowScalar: return std::pow(a, at["exponent"].get<double>());
    case PwCode::Eq: return a == b;
    case PwCode::Ne: return a != b;
    case PwCode::Lt: return a < b;
    case PwCode::Le: return a <= b;
    case PwCode::Gt: return a > b;
    case PwCode::Ge: return a >= b;
    case PwCode::Where: return cnd ? a : b;      // condition, self, other
    case PwCode::MaskedFill: return cnd ? b : a;  // self, mask, value
    case PwCode::Neg: return -a;
    case PwCode::Exp: return std::exp(a);
    case PwCode::Expm1: return std::expm1(a);
    case PwCode::Log: return std::log(a);
    case PwCode::Log1p: return std::log1p(a);
    case PwCode::Sqrt: return std::sqrt(a);
    case PwCode::Rsqrt: return 1 / std::sqrt(a);
    case PwCode::Abs: return std::fabs(a);
    case PwCode::Relu: return a > 0 ? a : 0;
    case PwCode::Sigmoid: return 1 / (1 + std::exp(-a));
    case PwCode::Tanh: return std::tanh(a);
    case PwCode::Cos: return std::cos(a);
    case PwCode::Sin: return std::sin(a);
    case PwCode::Reciprocal: return 1 / a;
    case PwCode::Sign: return (a > 0) - (a < 0);
    case PwCode::Erf: return std::erf(a);
    case PwCode::Gelu: return a / 2 * (1 + std::erf(a / std::sqrt(2.0)));
    case PwCode::Cast: return static_cast<float>(a);
    case PwCode::Clamp: return std::min(std::max(a, at["min"].get<double>()), at["max"].get<double>());
    case PwCode::None: break;
  }
  ADD_FAILURE() << "no reference";
  return 0;
}

bool is_cmp(PwCode c) { return c >= PwCode::Eq && c <= PwCode::Ge; }

TEST(OpPlans, PointwiseCodesMatchTheCpuKernels) {
  std::mt19937 g(17);
  std::set<PwCode> seen;
  const Shape s{13};
  for (const ts::OpDef& d : ts::OpRegistry::get().all()) {
    const ts::Pointwise pw = d.pointwise;
    if (pw.code == PwCode::None) continue;
    seen.insert(pw.code);
    // Positive operands keep log, sqrt and pow real.
    HostTensor a = random_f64(s, g, 0.25, 2.0), b = random_f64(s, g, 0.25, 2.0);
    HostTensor m = random_bool(s, g);
    if (is_cmp(pw.code))  // make some elements equal
      for (int64_t i = 0; i < 13; i += 3) b.view.as<double>()[i] = a.view.as<double>()[i];
    json at = json::object();
    if (pw.scalar_attr) at[pw.scalar_attr] = 0.75;
    if (pw.code == PwCode::Add || pw.code == PwCode::Sub) at["alpha"] = 1.5;
    if (pw.code == PwCode::PowScalar) at["exponent"] = 1.7;
    if (pw.code == PwCode::Clamp) at["min"] = 0.5, at["max"] = 1.5;
    if (pw.code == PwCode::Cast) at["dtype"] = "float32";
    std::vector<const HostTensor*> in;
    if (pw.code == PwCode::Where) in = {&m, &a, &b};
    else if (pw.code == PwCode::MaskedFill) in = {&a, &m};
    else if (pw.scalar_attr || pw.code == PwCode::PowScalar || pw.code >= PwCode::Neg) in = {&a};
    else in = {&a, &b};
    std::vector<HostTensor> out;
    try {
      out = ts_test::run_op(d.name, at, in);
    } catch (const ts::Error& e) {
      ADD_FAILURE() << d.name << ": " << e.what();
      continue;
    }
    for (int64_t i = 0; i < 13; ++i) {
      const double x = value(a, i), y = pw.scalar_attr ? at[pw.scalar_attr].get<double>() : value(b, i);
      const double want = reference(pw.code, x, y, value(m, i), at);
      EXPECT_NEAR(value(out[0], i), want, 1e-12 * (1 + std::fabs(want))) << d.name << " at " << i;
    }
  }
  // Every code names some op.
  for (int c = static_cast<int>(PwCode::Add); c <= static_cast<int>(PwCode::Clamp); ++c)
    EXPECT_TRUE(seen.count(static_cast<PwCode>(c))) << "code " << c;
}

// ---- strided views ----

// Gathers out[i] = in at the view's offset + sum(i_j * stride_j).
std::vector<double> gather(const std::vector<double>& in, const ts::StridedView& v) {
  std::vector<double> out(ts::shape_numel(v.size));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t rem = i, at = v.offset;
    for (size_t d = v.size.size(); d-- > 0;) {
      at += rem % v.size[d] * v.stride[d];
      rem /= v.size[d];
    }
    out[i] = in.at(at);
  }
  return out;
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(t.view.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(t, i);
  return v;
}

// Each copying view op's strided view of a contiguous input, gathered, is
// what its CPU kernel computes.
TEST(OpPlans, StridedViewsMatchTheCpuKernels) {
  std::mt19937 g(19);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    Shape s(r(1, 4));
    for (auto& d : s) d = r(1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    HostTensor x = random_f64(s, g, -1, 1);
    std::string op;
    json at = json::object();
    switch (trial % 6) {
      case 0: op = "aten.clone.default"; break;
      case 1: {
        op = "aten.t.default";
        if (rank > 2) continue;
        break;
      }
      case 2:
        op = "aten.transpose.int";
        at = {{"dim0", r(-rank, rank - 1)}, {"dim1", r(-rank, rank - 1)}};
        break;
      case 3: {
        op = "aten.permute.default";
        std::vector<int64_t> p(rank);
        for (int64_t i = 0; i < rank; ++i) p[i] = i;
        std::shuffle(p.begin(), p.end(), g);
        at = {{"dims", p}};
        break;
      }
      case 4: {
        op = "aten.expand.default";
        std::vector<int64_t> size;
        for (int64_t i = 0; i < r(0, 2); ++i) size.push_back(r(1, 3));
        for (int64_t d : s) size.push_back(d == 1 ? r(1, 3) : (g() % 3 ? d : -1));
        at = {{"size", size}};
        break;
      }
      case 5: {
        op = "aten.as_strided.default";
        const int64_t n = x.view.numel();
        std::vector<int64_t> size{r(1, 3), r(1, 3)}, stride{r(0, 2), r(0, 2)};
        const int64_t span = (size[0] - 1) * stride[0] + (size[1] - 1) * stride[1];
        if (span >= n) continue;
        at = {{"size", size}, {"stride", stride}, {"storage_offset", r(0, n - 1 - span)}};
        break;
      }
    }
    const ts::OpDef* def = ts::OpRegistry::get().find(op);
    ASSERT_TRUE(def && def->strided_view) << op;
    std::vector<ts::TensorType> types;
    auto out = ts_test::run_op(op, at, {&x}, &types);
    ts::NodeCtx n("n0", op, at, {x.view.type()}, {true});
    const auto v = def->strided_view(n, ts::contiguous_view(s), types[0].shape);
    ASSERT_TRUE(v) << op;
    EXPECT_EQ(v->size, types[0].shape) << op;
    EXPECT_EQ(gather(values(x), *v), values(out[0])) << op << " " << at << " " << ts::shape_str(s);
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// slice / select: the arguments' elements (start + k * step along dim) are
// what the CPU kernels copy.
TEST(OpPlans, SliceAndSelectArgsMatchTheCpuKernels) {
  std::mt19937 g(23);
  for (int trial = 0; trial < 300; ++trial) {
    auto r = [&](int lo, int hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
    Shape s(r(1, 4));
    for (auto& d : s) d = r(1, 5);
    const int64_t rank = static_cast<int64_t>(s.size());
    HostTensor x = random_f64(s, g, -1, 1);
    const bool select = g() % 3 == 0;
    json at = {{"dim", r(-rank, rank - 1)}};
    ts::StridedView v = ts::contiguous_view(s);
    const auto st = v.stride;
    const char* op = select ? "aten.select.int" : "aten.slice.Tensor";
    const int64_t dn = s[at["dim"].get<int64_t>() < 0 ? at["dim"].get<int64_t>() + rank : at["dim"].get<int64_t>()];
    if (select) {
      at["index"] = r(-dn, dn - 1);
    } else {
      if (g() % 4) at["start"] = r(-7, 7);
      if (g() % 4) at["end"] = g() % 5 ? json(r(-7, 7)) : json(int64_t{1} << 62);
      if (g() % 2) at["step"] = r(1, 3);
    }
    ts::NodeCtx n("n0", op, at, {x.view.type()}, {true});
    if (select) {
      const auto [dim, i] = ts::select_args(n);
      v.offset = i * st[dim];
      v.size.erase(v.size.begin() + dim);
      v.stride.erase(v.stride.begin() + dim);
    } else {
      const ts::SliceArgs a = ts::slice_args(n);
      v.offset = a.start * st[a.dim];
      v.size[a.dim] = a.len;
      v.stride[a.dim] = st[a.dim] * a.step;
    }
    auto out = ts_test::run_op(op, at, {&x});
    EXPECT_EQ(gather(values(x), v), values(out[0])) << op << " " << at << " " << ts::shape_str(s);
  }
}

}  // namespace

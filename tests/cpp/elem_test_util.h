// Test helpers for the elementwise/reduce/index/shape/creation/random ops:
// build typed host tensors, then infer + make + run an op by registry name.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "trainstep/bfloat16.h"
#include "verify/diff.h"

namespace elemtest {

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

// A host tensor plus its IR type (wrapped flag for Python scalars).
struct Arg {
  std::shared_ptr<HostTensor> t;
  bool wrapped = false;
  const ts::Tensor& tensor() const { return t->view; }
  ts::TensorType type() const {
    ts::TensorType ty = t->view.type();
    ty.wrapped = wrapped;
    return ty;
  }
  template <class T>
  T* data() const { return t->view.as<T>(); }
  int64_t numel() const { return t->view.numel(); }
};

// Element access as double for any dtype.
inline double get(const ts::Tensor& t, int64_t i) { return ts::element(t, i); }
inline void set(const ts::Tensor& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::F32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::F64: t.as<double>()[i] = v; break;
    case DType::I64: t.as<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::I32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::U8: t.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::Bool: t.as<bool>()[i] = v != 0; break;
    case DType::BF16: t.as<uint16_t>()[i] = ts::float_to_bf16(static_cast<float>(v)); break;
  }
}

// A tensor from double values (cast to dt).
inline Arg tensor(DType dt, const Shape& s, const std::vector<double>& v, bool wrapped = false) {
  Arg a{std::make_shared<HostTensor>(dt, s), wrapped};
  EXPECT_EQ(static_cast<int64_t>(v.size()), a.numel());
  for (size_t i = 0; i < v.size(); ++i) set(a.tensor(), static_cast<int64_t>(i), v[i]);
  return a;
}

// Random values suited to the dtype: floats in [lo, hi), ints in [lo, hi].
inline Arg random(DType dt, const Shape& s, std::mt19937& rng, double lo = -3, double hi = 3) {
  Arg a{std::make_shared<HostTensor>(dt, s), false};
  std::uniform_real_distribution<double> u(lo, hi);
  std::uniform_int_distribution<int> bi(0, 1);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = u(rng);
    if (dt == DType::Bool) v = bi(rng);
    else if (!ts::dtype_is_float(dt)) v = std::round(v);
    if (dt == DType::U8) v = std::fabs(v);
    set(a.tensor(), i, v);
  }
  return a;
}

inline std::vector<double> values(const Arg& a) {
  std::vector<double> v(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) v[i] = get(a.tensor(), i);
  return v;
}

inline ts::NodeCtx node_ctx(const std::string& op, const json& attrs, const std::vector<Arg>& in) {
  std::vector<ts::TensorType> types;
  for (const auto& a : in) types.push_back(a.type());
  return ts::NodeCtx("n1", op, attrs, types, std::vector<bool>(in.size(), true));
}

inline const ts::OpDef& op_def(const std::string& op) {
  const ts::OpDef* d = ts::OpRegistry::get().find(op);
  if (!d) throw std::runtime_error("op not registered: " + op);
  return *d;
}

// Only type inference (for error tests and dtype checks).
inline std::vector<ts::TensorType> infer(const std::string& op, const json& attrs, const std::vector<Arg>& in) {
  json a = attrs;
  auto ctx = node_ctx(op, a, in);
  return op_def(op).infer(ctx);
}

// infer + make + run; outputs are freshly allocated (or alias input 0).
inline std::vector<Arg> run(const std::string& op, const json& attrs, const std::vector<Arg>& in,
                            int threads = 2) {
  json a = attrs;
  auto ctx = node_ctx(op, a, in);
  const ts::OpDef& def = op_def(op);
  auto types = def.infer(ctx);
  std::vector<Arg> outs;
  std::vector<ts::Tensor> ot, it;
  for (const auto& x : in) it.push_back(x.tensor());
  for (const auto& t : types) {
    Arg o;
    if (def.alias_input0) {
      o.t = std::make_shared<HostTensor>();
      o.t->view = ts::Tensor{t.dtype, t.shape, in[0].tensor().data};
    } else {
      o.t = std::make_shared<HostTensor>(t.dtype, t.shape);
    }
    outs.push_back(o);
    ot.push_back(o.tensor());
  }
  ts::KernelCtx kc{ctx, types, threads};
  auto k = def.make(kc);
  if (def.alias_input0) {
    EXPECT_EQ(k, nullptr);
  } else {
    EXPECT_NE(k, nullptr);
    k->run(it.data(), ot.data());
  }
  return outs;
}

// Expects fn to throw ts::Error whose message contains `text`.
template <class F>
void expect_error(F&& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// Index mapping for reference broadcasting: flat output index -> input index.
inline int64_t bcast_index(int64_t flat, const Shape& out, const Shape& in) {
  int64_t idx = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1, j = static_cast<int>(in.size()) - 1; d >= 0; --d, --j) {
    const int64_t i = flat % out[d];
    flat /= out[d];
    if (j >= 0) {
      if (in[j] != 1) idx += i * stride;
      stride *= in[j];
    }
  }
  return idx;
}

inline void expect_close(const Arg& got, const std::vector<double>& want, double rtol, double atol = 0) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = get(got.tensor(), static_cast<int64_t>(i)), w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "at " << i;
      continue;
    }
    EXPECT_LE(std::fabs(g - w), atol + rtol * std::fabs(w)) << "at " << i << ": got " << g << " want " << w;
  }
}

}  // namespace elemtest

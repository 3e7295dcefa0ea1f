#include "ops/op.h"

namespace ts {

bool& LayoutTimer::on() {
  static thread_local bool v = false;
  return v;
}
double& LayoutTimer::seconds() {
  static thread_local double v = 0;
  return v;
}

const TensorType& NodeCtx::input(int i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return inputs_[i];
}

void NodeCtx::fail(const std::string& msg) const {
  throw Error("node '" + node_ + "' (" + op_ + "): " + msg);
}

void NodeCtx::expect_inputs(int n) const {
  if (num_inputs() != n)
    fail("expected " + std::to_string(n) + " inputs, got " + std::to_string(num_inputs()));
}

void NodeCtx::expect_dtype(int i, DType t) const {
  if (input(i).dtype != t)
    fail("input " + std::to_string(i) + " must be " + dtype_name(t) + ", got " +
         input(i).str());
}

bool NodeCtx::has_attr(const std::string& k) const {
  return attrs_.is_object() && attrs_.contains(k) && !attrs_.at(k).is_null();
}

const json& NodeCtx::attr(const std::string& k) const {
  if (!has_attr(k)) fail("missing attribute '" + k + "'");
  return attrs_.at(k);
}

int64_t NodeCtx::attr_int(const std::string& k) const {
  const json& v = attr(k);
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (!v.is_number_integer()) fail("attribute '" + k + "' must be an integer");
  return v.get<int64_t>();
}

double NodeCtx::attr_float(const std::string& k) const {
  const json& v = attr(k);
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string()) {  // non-finite floats travel as strings
    std::string s = v.get<std::string>();
    if (s == "inf") return 1.0 / 0.0;
    if (s == "-inf") return -1.0 / 0.0;
    if (s == "nan") return 0.0 / 0.0;
  }
  if (!v.is_number()) fail("attribute '" + k + "' must be a number");
  return v.get<double>();
}

bool NodeCtx::attr_bool(const std::string& k) const {
  const json& v = attr(k);
  if (!v.is_boolean()) fail("attribute '" + k + "' must be a bool");
  return v.get<bool>();
}

std::vector<int64_t> NodeCtx::attr_ints(const std::string& k) const {
  const json& v = attr(k);
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (!v.is_array()) fail("attribute '" + k + "' must be a list of integers");
  std::vector<int64_t> r;
  for (const auto& e : v) {
    if (!e.is_number_integer()) fail("attribute '" + k + "' must be a list of integers");
    r.push_back(e.get<int64_t>());
  }
  return r;
}

void NodeCtx::attr_pair(const std::string& k, int64_t& a, int64_t& b, bool empty_ok) const {
  std::vector<int64_t> v = attr_ints(k);
  if (v.empty() && empty_ok) return;
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    fail("attribute '" + k + "' must have 1 or 2 values, got " + std::to_string(v.size()));
  a = v[0];
  b = v[1];
}

std::vector<bool> NodeCtx::attr_bools(const std::string& k) const {
  const json& v = attr(k);
  if (!v.is_array()) fail("attribute '" + k + "' must be a list of bools");
  std::vector<bool> r;
  for (const auto& e : v) {
    if (!e.is_boolean()) fail("attribute '" + k + "' must be a list of bools");
    r.push_back(e.get<bool>());
  }
  return r;
}

std::string NodeCtx::attr_str(const std::string& k) const {
  const json& v = attr(k);
  if (!v.is_string()) fail("attribute '" + k + "' must be a string");
  return v.get<std::string>();
}

std::optional<DType> NodeCtx::attr_dtype(const std::string& k) const {
  if (!has_attr(k)) return std::nullopt;
  const json& v = attrs_.at(k);
  if (!v.is_string()) fail("attribute '" + k + "' must be a dtype name");
  try {
    return dtype_from_name(v.get<std::string>());
  } catch (const Error& e) {
    fail(e.what());
  }
}

const OpDef* OpRegistry::find(const std::string& name) const {
  for (const auto& op : ops_)
    if (op.name == name) return &op;
  return nullptr;
}

void OpRegistry::add(OpDef def) {
  if (find(def.name)) fail("op '" + def.name + "' registered twice");
  ops_.push_back(std::move(def));
}

StridedView contiguous_view(const Shape& s) {
  StridedView v{s, std::vector<int64_t>(s.size(), 1), 0};
  for (size_t j = s.size(); j-- > 1;) v.stride[j - 1] = v.stride[j] * s[j];
  return v;
}

bool is_contiguous(const StridedView& v) {
  int64_t want = 1;
  for (size_t j = v.size.size(); j-- > 0;) {
    if (v.size[j] == 1) continue;  // any stride: never stepped
    if (v.stride[j] != want) return false;
    want *= v.size[j];
  }
  return true;
}

}  // namespace ts

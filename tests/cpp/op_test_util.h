// Test helpers that drive an op the way the runtime does: registry lookup,
// NodeCtx + infer, KernelCtx + make, then Kernel::run on HostTensors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"

namespace ts_test {

using json = nlohmann::json;

// A compiled op node. Inputs are given as pointers; nullptr marks an absent
// optional input. Keeps attrs and NodeCtx alive as long as the kernel.
class OpHarness {
 public:
  OpHarness(const std::string& op, const json& attrs,
            const std::vector<const ts::HostTensor*>& inputs, int threads = 0)
      : attrs_(attrs) {
    def_ = ts::OpRegistry::get().find(op);
    if (!def_) throw ts::Error("op '" + op + "' is not registered");
    std::vector<ts::TensorType> types;
    std::vector<bool> present;
    for (const ts::HostTensor* t : inputs) {
      types.push_back(t ? t->view.type() : ts::TensorType{});
      present.push_back(t != nullptr);
    }
    node_ = std::make_unique<ts::NodeCtx>("n0", op, attrs_, types, present);
    out_types_ = def_->infer(*node_);
    ts::KernelCtx kc{*node_, out_types_, threads};
    kernel_ = def_->make(kc);
  }

  const std::vector<ts::TensorType>& out_types() const { return out_types_; }
  const ts::Kernel& kernel() const { return *kernel_; }

  // Allocates outputs (skip_outputs[j] -> data == nullptr) and runs once.
  std::vector<ts::HostTensor> run(const std::vector<const ts::HostTensor*>& inputs,
                                  const std::vector<bool>& skip_outputs = {}) {
    std::vector<ts::HostTensor> outs;
    for (size_t j = 0; j < out_types_.size(); ++j) {
      outs.emplace_back(out_types_[j].dtype, out_types_[j].shape);
      if (j < skip_outputs.size() && skip_outputs[j]) outs.back().view.data = nullptr;
    }
    run_into(inputs, outs);
    return outs;
  }

  // Runs into caller-owned outputs.
  void run_into(const std::vector<const ts::HostTensor*>& inputs, std::vector<ts::HostTensor>& outs) {
    std::vector<ts::Tensor> in;
    for (const ts::HostTensor* t : inputs) in.push_back(t ? t->view : ts::Tensor{});
    std::vector<ts::Tensor> out;
    for (auto& o : outs) out.push_back(o.view);
    kernel_->run(in.data(), out.data());
  }

 private:
  json attrs_;
  const ts::OpDef* def_ = nullptr;
  std::unique_ptr<ts::NodeCtx> node_;
  std::vector<ts::TensorType> out_types_;
  std::unique_ptr<ts::Kernel> kernel_;
};

// One-shot: infer, make and run. out_types receives the inferred types.
inline std::vector<ts::HostTensor> run_op(const std::string& op, const json& attrs,
                                          const std::vector<const ts::HostTensor*>& inputs,
                                          std::vector<ts::TensorType>* out_types = nullptr,
                                          const std::vector<bool>& skip_outputs = {}) {
  OpHarness h(op, attrs, inputs);
  if (out_types) *out_types = h.out_types();
  return h.run(inputs, skip_outputs);
}

// Only infer; returns the types (or throws the op's ts::Error).
inline std::vector<ts::TensorType> infer_op(const std::string& op, const json& attrs,
                                            const std::vector<ts::TensorType>& inputs,
                                            std::vector<bool> present = {}) {
  const ts::OpDef* def = ts::OpRegistry::get().find(op);
  if (!def) throw ts::Error("op '" + op + "' is not registered");
  if (present.empty()) present.assign(inputs.size(), true);
  ts::NodeCtx node("n0", op, attrs, inputs, present);
  return def->infer(node);
}

// The ts::Error message that infer throws, or "" if it succeeds.
inline std::string infer_error(const std::string& op, const json& attrs,
                               const std::vector<ts::TensorType>& inputs,
                               std::vector<bool> present = {}) {
  try {
    infer_op(op, attrs, inputs, std::move(present));
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "";
}

inline ts::HostTensor random_f32(const ts::Shape& shape, std::mt19937& rng, float lo = -1.f,
                                 float hi = 1.f) {
  ts::HostTensor t(ts::DType::F32, shape);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.view.as<float>();
  for (int64_t i = 0; i < t.view.numel(); ++i) p[i] = d(rng);
  return t;
}

inline const float* f32(const ts::HostTensor& t) { return t.view.as<float>(); }

// Element-wise |got - want| <= atol + rtol * |want|, reporting the first miss.
inline ::testing::AssertionResult all_close(const ts::HostTensor& got, const std::vector<float>& want,
                                            float rtol = 1e-4f, float atol = 1e-4f) {
  if (got.view.numel() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << "size " << got.view.numel() << " vs " << want.size();
  const float* g = f32(got);
  for (size_t i = 0; i < want.size(); ++i) {
    bool both_nan = std::isnan(g[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::fabs(g[i] - want[i]) <= atol + rtol * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "at " << i << ": got " << g[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ts_test

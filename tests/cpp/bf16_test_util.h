// Shared by the bfloat16 kernel tests: a node built through the registry
// and run by its Native kernel and by its float32 twin (make_kernel's
// ViaFloat32 form), and bf16-exact random inputs.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "trainstep/bfloat16.h"

namespace bf16_test {

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using json = nlohmann::json;

inline HostTensor random_bf16(const Shape& s, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  HostTensor t(DType::BF16, s);
  std::uniform_real_distribution<float> u(lo, hi);
  uint16_t* p = t.view.as<uint16_t>();
  for (int64_t i = 0; i < t.view.numel(); ++i) p[i] = ts::float_to_bf16(u(rng));
  return t;
}

// One node built through the registry, run by its Native kernel and by its
// float32 twin (the same OpDef marked ViaFloat32).
struct Bf16Node {
  json attrs;
  std::vector<ts::TensorType> out_types;
  std::unique_ptr<ts::NodeCtx> node;
  std::unique_ptr<ts::Kernel> native, via_f32;

  Bf16Node(const std::string& op, json a, const std::vector<const HostTensor*>& in)
      : attrs(std::move(a)) {
    const ts::OpDef* def = ts::OpRegistry::get().find(op);
    if (!def) throw ts::Error("op '" + op + "' is not registered");
    EXPECT_EQ(def->bf16, ts::Bf16::Native) << op;
    std::vector<ts::TensorType> types;
    std::vector<bool> present;
    for (const HostTensor* t : in) {
      types.push_back(t ? t->view.type() : ts::TensorType{});
      present.push_back(t != nullptr);
    }
    node = std::make_unique<ts::NodeCtx>("n0", op, attrs, types, present);
    out_types = def->infer(*node);
    ts::KernelCtx kc{*node, out_types, 2};
    native = ts::make_kernel(*def, kc);
    ts::OpDef twin;
    twin.name = def->name;
    twin.infer = def->infer;
    twin.make = def->make;  // bf16 stays ViaFloat32
    via_f32 = ts::make_kernel(twin, kc);
  }

  // Outputs for k on `in`; skip[j]: output j is not read (data nullptr).
  std::vector<HostTensor> run(ts::Kernel& k, const std::vector<const HostTensor*>& in,
                              const std::vector<bool>& skip = {}) {
    std::vector<HostTensor> outs;
    std::vector<ts::Tensor> it, ot;
    for (const HostTensor* t : in) it.push_back(t ? t->view : ts::Tensor{});
    for (size_t j = 0; j < out_types.size(); ++j) {
      outs.emplace_back(out_types[j].dtype, out_types[j].shape);
      ot.push_back(outs.back().view);
      if (j < skip.size() && skip[j]) ot.back().data = nullptr;
    }
    k.run(it.data(), ot.data());
    return outs;
  }
};

// bf16's spacing at |v| (8 significant bits).
inline float bf16_ulp(float v) {
  int e = 0;
  std::frexp(std::fabs(v), &e);
  return std::ldexp(1.f, e - 8);
}

}  // namespace bf16_test

// make_kernel: a bfloat16 node of a ViaFloat32 op runs its float32 twin.
// The twin is the same node with every bfloat16 input, output and dtype
// attr made float32; its inputs are converted up (exact) and its float32
// outputs rounded to bfloat16 once, as torch's CPU kernels compute
// bfloat16 in float32 and round the result.
#include "ops/bf16_kernel.h"

#include <algorithm>

#include "ops/broadcast.h"
#include "ops/parallel.h"
#include "trainstep/bfloat16.h"

namespace ts {

// Every dtype attr (dtype, input_dtype) naming bfloat16 names float32.
json float32_attrs(const json& attrs) {
  json a = attrs;
  if (!a.is_object()) return a;
  for (auto& [key, v] : a.items())
    if (v.is_string() && v.get<std::string>() == dtype_name(DType::BF16)) v = dtype_name(DType::F32);
  return a;
}

TensorType float32_type(TensorType t) {
  if (t.dtype == DType::BF16) t.dtype = DType::F32;
  return t;
}

namespace {

bool is_bf16(const TensorType& t) { return t.dtype == DType::BF16; }

bool touches_bf16(const KernelCtx& k) {
  for (int i = 0; i < k.node.num_inputs(); ++i)
    if (k.node.has_input(i) && is_bf16(k.node.input(i))) return true;
  for (const auto& t : k.outputs)
    if (is_bf16(t)) return true;
  return false;
}

// Conversions in chunks over the node's threads: they are memory-bound
// passes as long as the twin's own.
constexpr int64_t kConvertChunk = 1 << 14;

void widen(const void* src, void* dst, int64_t n, bool parallel) {
  const auto* s = static_cast<const uint16_t*>(src);
  auto* d = static_cast<float*>(dst);
  parallel_for((n + kConvertChunk - 1) / kConvertChunk, parallel && n > kConvertChunk, [&](int64_t c) {
    const int64_t i = c * kConvertChunk;
    bf16_to_floats(s + i, d + i, std::min(kConvertChunk, n - i));
  });
}

void narrow(const void* src, void* dst, int64_t n, bool parallel) {
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<uint16_t*>(dst);
  parallel_for((n + kConvertChunk - 1) / kConvertChunk, parallel && n > kConvertChunk, [&](int64_t c) {
    const int64_t i = c * kConvertChunk;
    floats_to_bf16(s + i, d + i, std::min(kConvertChunk, n - i));
  });
}

class ViaFloat32 : public Kernel {
 public:
  ViaFloat32(const OpDef& def, const KernelCtx& k)
      : attrs_(float32_attrs(k.node.attrs())), parallel_(k.threads != 1) {
    const NodeCtx& n = k.node;
    std::vector<TensorType> in_types;
    std::vector<bool> present;
    for (int i = 0; i < n.num_inputs(); ++i) {
      present.push_back(n.has_input(i));
      TensorType t = n.has_input(i) ? n.input(i) : TensorType{};
      const bool conv = n.has_input(i) && is_bf16(t);
      if (conv) t.dtype = DType::F32;
      in_conv_.push_back(conv);
      in_buf_.emplace_back(conv ? t.nbytes() : 0);
      ins_.push_back({t.dtype, t.shape, nullptr});
      in_types.push_back(t);
    }
    for (const auto& o : k.outputs) {
      TensorType t = o;
      const bool conv = is_bf16(t);
      if (conv) t.dtype = DType::F32;
      out_conv_.push_back(conv);
      out_buf_.emplace_back(conv ? t.nbytes() : 0);
      outs_.push_back({t.dtype, t.shape, nullptr});
      out_types_.push_back(t);
    }
    NodeCtx twin(n.node(), n.op(), attrs_, in_types, present);
    const std::vector<TensorType> inferred = def.infer(twin);
    if (inferred.size() != out_types_.size())
      n.fail("its float32 form has " + std::to_string(inferred.size()) + " outputs");
    for (size_t j = 0; j < inferred.size(); ++j)
      if (inferred[j] != out_types_[j])
        n.fail("output " + std::to_string(j) + " is " + k.outputs[j].str() +
               ", but its float32 form gives " + inferred[j].str() +
               " (the op cannot run bfloat16 through float32)");
    KernelCtx tk{twin, out_types_, k.threads, k.collective};
    inner_ = def.make(tk);
  }

  void run(const Tensor* in, Tensor* out) override {
    for (size_t i = 0; i < ins_.size(); ++i) {
      if (in_conv_[i] && in[i].data) {
        widen(in[i].data, in_buf_[i].data(), ins_[i].numel(), parallel_);
        ins_[i].data = in_buf_[i].data();
      } else {
        ins_[i].data = in[i].data;
      }
    }
    for (size_t j = 0; j < outs_.size(); ++j)
      outs_[j].data = out_conv_[j] ? (out[j].data ? out_buf_[j].data() : nullptr) : out[j].data;
    inner_->run(ins_.data(), outs_.data());
    for (size_t j = 0; j < outs_.size(); ++j)
      if (out_conv_[j] && out[j].data)
        narrow(outs_[j].data, out[j].data, outs_[j].numel(), parallel_);
  }

  std::vector<const KernelChoice*> choices() const override { return inner_->choices(); }

 private:
  json attrs_;  // the twin's attrs: kernels read them in make only
  bool parallel_;
  std::vector<TensorType> out_types_;
  std::vector<bool> in_conv_, out_conv_;
  std::vector<Buffer> in_buf_, out_buf_;
  std::vector<Tensor> ins_, outs_;
  std::unique_ptr<Kernel> inner_;
};

}  // namespace

std::unique_ptr<Kernel> make_via_float32(const OpDef& def, const KernelCtx& ctx) {
  return std::make_unique<ViaFloat32>(def, ctx);
}

std::unique_ptr<Kernel> make_kernel(const OpDef& def, const KernelCtx& ctx) {
  if (def.bf16 == Bf16::ViaFloat32 && touches_bf16(ctx)) return std::make_unique<ViaFloat32>(def, ctx);
  return def.make(ctx);
}

}  // namespace ts

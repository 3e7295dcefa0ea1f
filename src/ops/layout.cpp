#include "ops/layout.h"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

namespace ts {

namespace {

const char* key(bool output) { return output ? "out_layouts" : "in_layouts"; }

// The names listed under key, or none when the attribute is absent.
std::vector<std::string> names(const NodeCtx& ctx, bool output) {
  std::vector<std::string> r;
  if (!ctx.has_attr(key(output))) return r;
  const json& v = ctx.attrs().at(key(output));
  if (!v.is_array()) ctx.fail(std::string("attribute '") + key(output) + "' must be a list of layout names");
  for (const auto& e : v) {
    if (!e.is_string()) ctx.fail(std::string("attribute '") + key(output) + "' must be a list of layout names");
    r.push_back(e.get<std::string>());
  }
  return r;
}

Layout parse(const NodeCtx& ctx, const std::string& s) {
  if (s == "plain") return Layout::Plain;
  if (s == "nChw8c") return Layout::Blocked8;
  if (s == "nChw16c") return Layout::Blocked16;
  if (s == "nhwc") return Layout::ChannelsLast;
  ctx.fail("unknown layout '" + s + "' (expected plain, nChw8c, nChw16c or nhwc)");
}

}  // namespace

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Blocked8: return "nChw8c";
    case Layout::Blocked16: return "nChw16c";
    case Layout::ChannelsLast: return "nhwc";
    default: return "plain";
  }
}

int64_t layout_block(Layout l) {
  switch (l) {
    case Layout::Blocked8: return 8;
    case Layout::Blocked16: return 16;
    case Layout::ChannelsLast: fail("internal: layout_block asked of the channels-last layout");
    default: return 1;
  }
}

Layout layout_from_block(int64_t block) {
  return block == 16 ? Layout::Blocked16 : block == 8 ? Layout::Blocked8 : Layout::Plain;
}

Layout port_layout(const NodeCtx& ctx, bool output, int i, const TensorType& t) {
  std::vector<std::string> n = names(ctx, output);
  if (i >= static_cast<int>(n.size())) return Layout::Plain;
  Layout l = parse(ctx, n[i]);
  if (l == Layout::Plain) return l;
  const std::string port = std::string(output ? "output " : "input ") + std::to_string(i);
  if (l == Layout::ChannelsLast) {
    const OpDef* def = OpRegistry::get().find(ctx.op());
    if (!def || !def->layouts || !def->layouts->channels_last)
      ctx.fail(port + " has layout nhwc, which this op's kernels do not take");
    if (t.dtype != DType::BF16 || t.shape.size() != 4)
      ctx.fail(port + " has layout nhwc but type " + t.str() + " (needs bfloat16, rank 4)");
    return l;
  }
  if (t.dtype != DType::F32 || t.shape.size() != 4)
    ctx.fail(port + " has layout " + n[i] + " but type " + t.str() + " (needs float32, rank 4)");
  if (t.shape[1] % layout_block(l) != 0)
    ctx.fail(port + " has layout " + n[i] + " but " + std::to_string(t.shape[1]) +
             " channels, not a multiple of " + std::to_string(layout_block(l)));
  return l;
}

void check_layout_ports(const NodeCtx& ctx, const std::vector<int>& may_block_in,
                        const std::vector<int>& may_block_out) {
  for (bool output : {false, true}) {
    const std::vector<int>& ok = output ? may_block_out : may_block_in;
    std::vector<std::string> n = names(ctx, output);
    for (int i = 0; i < static_cast<int>(n.size()); ++i) {
      if (parse(ctx, n[i]) == Layout::Plain) continue;
      if (std::find(ok.begin(), ok.end(), i) == ok.end())
        ctx.fail(std::string(output ? "output " : "input ") + std::to_string(i) +
                 " cannot take layout " + n[i] + ": only activations may be blocked");
    }
  }
}

int64_t preferred_channel_block() {
  static const int64_t block = [] {
    auto isa = dnnl::get_effective_cpu_isa();
    switch (isa) {
      case dnnl::cpu_isa::avx512_core:
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
      case dnnl::cpu_isa::avx512_mic:
      case dnnl::cpu_isa::avx512_mic_4ops:
        return int64_t{16};
      default:
        return int64_t{8};
    }
  }();
  return block;
}

}  // namespace ts

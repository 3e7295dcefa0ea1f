#include "ops/tile_program.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "ops/bf16_kernel.h"
#include "ops/broadcast.h"

namespace ts {

namespace {

constexpr int kMaxArgs = 3;

// The group with every member's context and type.
struct Group {
  std::vector<std::unique_ptr<NodeCtx>> ctx;
  // The float32 twin of each member (bf16_kernel.h), whose tile form runs.
  std::vector<std::unique_ptr<json>> twin_attrs;
  std::vector<std::unique_ptr<NodeCtx>> twin;
  std::vector<const OpDef*> def;
  std::vector<TensorType> type;
  std::vector<std::vector<int>> args;  // >= 0: member; < 0: input -(a + 1)
  std::vector<bool> is_const;
  std::vector<int> outputs;
  Shape shape;
};

Group parse_group_attrs(const NodeCtx& ctx, const json& attrs, const std::vector<TensorType>& inputs) {
  const json& ms = attrs.at("members");
  const json& outputs = attrs.at("outputs");
  if (!ms.is_array() || ms.empty()) ctx.fail("attr members must be a non-empty list");
  Group g;
  const int n = static_cast<int>(ms.size());
  const int ni = static_cast<int>(inputs.size());
  bool have_shape = false;
  for (int j = 0; j < n; ++j) {
    const json& m = ms[j];
    const std::string op = m.at("op").get<std::string>();
    const std::string where = "member " + std::to_string(j) + " (" + op + ")";
    const OpDef* def = OpRegistry::get().find(op);
    if (!def) ctx.fail(where + ": unknown op");
    std::vector<int> args;
    std::vector<TensorType> types;
    for (const json& a : m.at("args")) {
      const std::string kind = a.at(0).get<std::string>();
      const int i = a.at(1).get<int>();
      if (kind == "in") {
        if (i < 0 || i >= ni) ctx.fail(where + ": no input " + std::to_string(i));
        args.push_back(-(i + 1));
        types.push_back(inputs[i]);
      } else if (kind == "m") {
        if (i < 0 || i >= j) ctx.fail(where + ": member ref " + std::to_string(i) + " is not earlier");
        if (g.is_const[i]) {
          types.push_back(g.type[i]);
        } else {
          TensorType t = g.type[i];
          t.wrapped = false;
          types.push_back(t);
        }
        args.push_back(i);
      } else {
        ctx.fail(where + ": bad ref kind '" + kind + "'");
      }
    }
    if (args.size() > static_cast<size_t>(kMaxArgs)) ctx.fail(where + ": too many args");
    auto c = std::make_unique<NodeCtx>(ctx.node() + "/" + m.value("name", op), op, m.at("attrs"),
                                       types, std::vector<bool>(types.size(), true));
    std::vector<TensorType> out = def->infer(*c);
    if (out.size() != 1) ctx.fail(where + ": fused members have one output");
    auto ta = std::make_unique<json>(float32_attrs(m.at("attrs")));
    std::vector<TensorType> ttypes;
    for (const auto& t : types) ttypes.push_back(float32_type(t));
    auto tc = std::make_unique<NodeCtx>(c->node(), op, *ta, ttypes, std::vector<bool>(types.size(), true));
    const bool cst = def->constant != ConstRole::None && args.empty() && out[0].numel() == 1;
    if (!cst) {
      if (!def->make_tile || !def->make_tile(*tc)) ctx.fail(where + ": no float32 tile form for these types");
      if (out[0].dtype != DType::F32 && out[0].dtype != DType::Bool && out[0].dtype != DType::BF16)
        ctx.fail(where + ": fused values are float32, bfloat16 or bool");
      if (!have_shape) {
        g.shape = out[0].shape;
        have_shape = true;
      } else if (out[0].shape != g.shape) {
        ctx.fail(where + ": shape " + shape_str(out[0].shape) + " differs from the group's " +
                 shape_str(g.shape));
      }
    }
    g.ctx.push_back(std::move(c));
    g.twin_attrs.push_back(std::move(ta));
    g.twin.push_back(std::move(tc));
    g.def.push_back(def);
    g.type.push_back(out[0]);
    g.args.push_back(std::move(args));
    g.is_const.push_back(cst);
  }
  if (!have_shape) ctx.fail("a fused group needs a pointwise member");
  const int64_t numel = shape_numel(g.shape);
  for (int i = 0; i < ni; ++i) {
    const TensorType& t = inputs[i];
    if (t.numel() == 1) continue;
    if (t.numel() != numel || (t.dtype != DType::F32 && t.dtype != DType::Bool && t.dtype != DType::BF16))
      ctx.fail("group input " + std::to_string(i) + " is " + t.str() +
               "; fused inputs are float32/bfloat16/bool of the group's numel, or one element");
  }
  for (const json& o : outputs) {
    const int j = o.get<int>();
    if (j < 0 || j >= n || g.is_const[j]) ctx.fail("bad output member " + std::to_string(j));
    g.outputs.push_back(j);
  }
  return g;
}

// The members/outputs attributes are JSON read with nlohmann's checked
// accessors: a malformed one (missing key, wrong type) becomes a node error.
Group parse_group(const NodeCtx& ctx, const json& attrs, const std::vector<TensorType>& inputs) {
  try {
    return parse_group_attrs(ctx, attrs, inputs);
  } catch (const json::exception& e) {
    ctx.fail(std::string("malformed members/outputs attribute: ") + e.what());
  }
}

}  // namespace

GroupSignature group_signature(const NodeCtx& ctx, const std::vector<TensorType>& inputs) {
  Group g = parse_group(ctx, ctx.attrs(), inputs);
  GroupSignature s;
  for (int j : g.outputs) s.outputs.push_back({g.type[j].dtype, g.type[j].shape});
  s.shape = g.shape;
  return s;
}

struct TileProgram::Impl {
  // Value slots: the group's inputs [0, ni), then the members [ni, ni + nm).
  enum Kind { InFloat, InBool, InBf16, Given, Shared, Reg };
  struct Slot {
    Kind kind = Reg;
    int tensor = -1;  // inputs: the node input holding it
    int reg = -1;     // Reg / InBool / InBf16: register index
    int shared = -1;  // Shared: index of its broadcast tile
    int out = -1;     // member value that is output `out`
  };
  struct Step {
    std::unique_ptr<TileOp> op;
    int args[kMaxArgs] = {};
    int nargs = 0;
    int dst = 0;              // slot
    bool round_bf16 = false;  // its value is bfloat16: rounded in the tile
  };
  struct Out {
    int slot = 0;
    int step = 0;  // the step that computes it
    bool is_bool = false;
    bool is_bf16 = false;
  };

  int ni = 0;
  int64_t numel = 0;
  int nthr = 1;
  int nregs = 0;
  int out_base = 0;
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Out> outs;
  std::vector<int> in_shared;  // input -> shared tile, or -1 (full-size input)
  std::vector<int> last_read;  // input -> last step reading it (-1: only at tile start)
  Buffer shared;               // nshared * kTile floats: constants and 0-d inputs
  Buffer regs;                 // nthr * nregs * kTile floats
  std::vector<float*> ptrs;    // nthr * nslots: this tile's pointer per slot
  std::vector<char> direct;    // per output: computed straight into the output

  float* shared_tile(int s) const { return static_cast<float*>(shared.data()) + s * kTile; }
};

TileProgram::TileProgram(const NodeCtx& ctx, const std::vector<TensorType>& inputs,
                         std::vector<int> tensor_of, int out_base, int threads)
    : p_(std::make_unique<Impl>()) {
  using K = Impl;
  Group g = parse_group(ctx, ctx.attrs(), inputs);
  Impl& k = *p_;
  const int ni = static_cast<int>(inputs.size()), nm = static_cast<int>(g.type.size());
  k.ni = ni;
  k.numel = shape_numel(g.shape);
  k.nthr = std::max(threads, 1);
  k.out_base = out_base;
  if (out_base < 0 && g.outputs.size() != 1) ctx.fail("a group whose output the kernel takes has one output");
  k.slots.resize(ni + nm);
  k.in_shared.assign(ni, -1);
  k.last_read.assign(ni, -1);
  int nshared = 0;
  std::vector<float> shared_vals;  // constants' values (inputs: filled each run)

  // Slot kinds and the step index of each member.
  std::vector<int> step_of(nm, -1);
  for (int i = 0; i < ni; ++i) {
    auto& s = k.slots[i];
    s.tensor = tensor_of.at(i);
    if (s.tensor < 0) {
      if (inputs[i].numel() == 1 || inputs[i].dtype != DType::F32)
        ctx.fail("the given group input is a full-size float32 tile");
      s.kind = K::Given;
    } else if (inputs[i].numel() == 1) {
      s.kind = K::Shared;
      s.shared = k.in_shared[i] = nshared++;
      shared_vals.push_back(0.0f);
    } else {
      const DType dt = inputs[i].dtype;
      s.kind = dt == DType::Bool ? K::InBool : dt == DType::BF16 ? K::InBf16 : K::InFloat;
    }
  }
  for (int j = 0; j < nm; ++j) {
    auto& s = k.slots[ni + j];
    if (g.is_const[j]) {
      // The constant op's own kernel makes the value; cast to float32 as
      // the consuming kernels' CastSlot does.
      std::vector<TensorType> ot = {g.type[j]};
      KernelCtx ck{*g.ctx[j], ot, 1};
      auto ker = g.def[j]->make(ck);
      alignas(16) unsigned char buf[16] = {};
      Tensor t;
      t.dtype = g.type[j].dtype;
      t.shape = g.type[j].shape;
      t.data = buf;
      ker->run(nullptr, &t);
      float v;
      cast_buffer(buf, t.dtype, &v, DType::F32, 1);
      s.kind = K::Shared;
      s.shared = nshared++;
      shared_vals.push_back(v);
    } else {
      s.kind = K::Reg;
      step_of[j] = static_cast<int>(k.steps.size());
      K::Step st;
      st.op = g.def[j]->make_tile(*g.twin[j]);
      if (!st.op) ctx.fail("member " + std::to_string(j) + " has no tile form");
      st.round_bf16 = g.type[j].dtype == DType::BF16;
      st.nargs = static_cast<int>(g.args[j].size());
      for (int a = 0; a < st.nargs; ++a) {
        const int v = g.args[j][a];
        st.args[a] = v >= 0 ? ni + v : -(v + 1);
        if (v < 0) k.last_read[-(v + 1)] = step_of[j];
      }
      st.dst = ni + j;
      k.steps.push_back(std::move(st));
    }
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const int j = g.outputs[o];
    K::Out out;
    out.slot = ni + j;
    out.step = step_of[j];
    out.is_bool = g.type[j].dtype == DType::Bool;
    out.is_bf16 = g.type[j].dtype == DType::BF16;
    if (out_base < 0 && (out.is_bool || out.is_bf16)) ctx.fail("the group output the kernel takes is float32");
    k.outs.push_back(out);
    if (k.slots[ni + j].out < 0) k.slots[ni + j].out = static_cast<int>(o);
  }
  // A bfloat16 member no step reads is rounded by its output's conversion
  // (floats_to_bf16 rounds the same way): one pass over the tile, not two.
  {
    std::vector<bool> read(ni + nm, false);
    for (const auto& st : k.steps)
      for (int a = 0; a < st.nargs; ++a) read[st.args[a]] = true;
    for (auto& st : k.steps)
      if (!read[st.dst]) st.round_bf16 = false;
  }
  // (A member listed as two outputs is computed into the first; the second
  // is copied from it at the tile end.)
  // Registers: bool and bfloat16 inputs live from the tile start to their
  // last read; members from their step to their last read (outputs: to the
  // tile end).
  const int nsteps = static_cast<int>(k.steps.size());
  std::vector<int> last(ni + nm, -1);
  for (int s = 0; s < nsteps; ++s)
    for (int a = 0; a < k.steps[s].nargs; ++a) last[k.steps[s].args[a]] = s;
  for (const auto& o : k.outs) last[o.slot] = nsteps;
  std::vector<int> free_regs;
  auto take = [&]() {
    if (free_regs.empty()) return k.nregs++;
    int r = free_regs.back();
    free_regs.pop_back();
    return r;
  };
  for (int i = 0; i < ni; ++i)
    if (k.slots[i].kind == K::InBool || k.slots[i].kind == K::InBf16) k.slots[i].reg = take();
  for (int s = 0; s < nsteps; ++s) {
    const auto& st = k.steps[s];
    k.slots[st.dst].reg = take();  // before freeing: a step never writes over its args
    for (int a = 0; a < st.nargs; ++a) {
      const int v = st.args[a];
      bool dup = false;
      for (int b = 0; b < a; ++b) dup = dup || st.args[b] == v;
      if (!dup && last[v] == s && k.slots[v].reg >= 0 &&
          (k.slots[v].kind == K::Reg || k.slots[v].kind == K::InBool || k.slots[v].kind == K::InBf16))
        free_regs.push_back(k.slots[v].reg);
    }
    if (last[st.dst] < s) free_regs.push_back(k.slots[st.dst].reg);  // never read
  }
  k.shared = Buffer(static_cast<size_t>(std::max(nshared, 1)) * kTile * sizeof(float));
  for (int s = 0; s < nshared; ++s) std::fill_n(k.shared_tile(s), kTile, shared_vals[s]);
  k.regs = Buffer(static_cast<size_t>(k.nthr) * std::max(k.nregs, 1) * kTile * sizeof(float));
  k.ptrs.assign(static_cast<size_t>(k.nthr) * k.slots.size(), nullptr);
  k.direct.assign(k.outs.size(), 0);
}

TileProgram::~TileProgram() = default;

int64_t TileProgram::numel() const { return p_->numel; }

void TileProgram::begin(const Tensor* in, Tensor* out) {
  Impl& k = *p_;
  // One-element inputs (lr, step counters...) change between runs.
  for (int i = 0; i < k.ni; ++i) {
    if (k.in_shared[i] < 0) continue;
    const Tensor& t = in[k.slots[i].tensor];
    float v;
    cast_buffer(t.data, t.dtype, &v, DType::F32, 1);
    std::fill_n(k.shared_tile(k.in_shared[i]), kTile, v);
  }
  // A float32 output is written in place by its step unless it shares
  // memory with an input that a later step still reads.
  for (size_t o = 0; o < k.outs.size(); ++o) {
    k.direct[o] = 0;
    if (k.out_base < 0) continue;
    const Tensor& ot = out[k.out_base + o];
    k.direct[o] = !k.outs[o].is_bool && !k.outs[o].is_bf16 && ot.data != nullptr;
    if (!k.direct[o]) continue;
    const char* ob = static_cast<const char*>(ot.data);
    const char* oe = ob + ot.nbytes();
    for (int i = 0; i < k.ni && k.direct[o]; ++i) {
      const Impl::Slot& s = k.slots[i];
      if (s.kind == Impl::Given || k.in_shared[i] >= 0 || k.last_read[i] <= k.outs[o].step) continue;
      const Tensor& it = in[s.tensor];
      const char* ib = static_cast<const char*>(it.data);
      if (ib < oe && ob < ib + it.nbytes()) k.direct[o] = 0;
    }
  }
}

void TileProgram::prefetch(int64_t off, const Tensor* in) const {
  const Impl& k = *p_;
  if (off >= k.numel) return;
  const int64_t n = std::min(kTile, k.numel - off);
  for (int i = 0; i < k.ni; ++i) {
    const Impl::Slot& s = k.slots[i];
    if (s.kind != Impl::InFloat && s.kind != Impl::InBool && s.kind != Impl::InBf16) continue;
    const int64_t size = static_cast<int64_t>(dtype_size(in[s.tensor].dtype));
    prefetch_lines(static_cast<const char*>(in[s.tensor].data) + off * size, n * size);
  }
}

void TileProgram::run_tile(int t, int64_t off, int64_t len, const Tensor* in, Tensor* out,
                           const float* given, float* take) {
  using K = Impl;
  Impl& k = *p_;
  const int nslots = static_cast<int>(k.slots.size());
  float* reg0 = static_cast<float*>(k.regs.data()) + static_cast<int64_t>(t) * k.nregs * kTile;
  float** P = k.ptrs.data() + static_cast<int64_t>(t) * nslots;
  for (int s = 0; s < nslots; ++s) {
    const K::Slot& sl = k.slots[s];
    switch (sl.kind) {
      case K::InFloat: P[s] = in[sl.tensor].as<float>() + off; break;
      case K::InBool: {
        float* r = reg0 + sl.reg * kTile;
        // Read as bytes: GCC leaves a loop over bool loads scalar.
        const uint8_t* b = static_cast<const uint8_t*>(in[sl.tensor].data) + off;
        for (int64_t i = 0; i < len; ++i) r[i] = b[i] != 0 ? 1.0f : 0.0f;
        P[s] = r;
        break;
      }
      case K::InBf16: {
        float* r = reg0 + sl.reg * kTile;
        bf16_to_floats(static_cast<const uint16_t*>(in[sl.tensor].data) + off, r, len);
        P[s] = r;
        break;
      }
      case K::Given: P[s] = const_cast<float*>(given); break;
      case K::Shared: P[s] = k.shared_tile(sl.shared); break;
      case K::Reg:
        if (k.out_base < 0 && sl.out == 0) P[s] = take;
        else if (sl.out >= 0 && k.direct[sl.out]) P[s] = out[k.out_base + sl.out].as<float>() + off;
        else P[s] = reg0 + sl.reg * kTile;
        break;
    }
  }
  for (const K::Step& st : k.steps) {
    const float* a[kMaxArgs];
    for (int i = 0; i < st.nargs; ++i) a[i] = P[st.args[i]];
    st.op->run(a, P[st.dst], len);
    if (st.round_bf16) round_floats_to_bf16(P[st.dst], len);
  }
  if (k.out_base < 0) return;  // computed into `take`
  for (size_t o = 0; o < k.outs.size(); ++o) {
    Tensor& ot = out[k.out_base + o];
    if (!ot.data || k.direct[o]) continue;
    const float* r = P[k.outs[o].slot];
    if (k.outs[o].is_bool) {
      uint8_t* b = static_cast<uint8_t*>(ot.data) + off;
      for (int64_t i = 0; i < len; ++i) b[i] = r[i] != 0.0f;
    } else if (k.outs[o].is_bf16) {  // rounded already: exact
      floats_to_bf16(r, static_cast<uint16_t*>(ot.data) + off, len);
    } else {
      std::memcpy(ot.as<float>() + off, r, static_cast<size_t>(len) * sizeof(float));
    }
  }
}

}  // namespace ts

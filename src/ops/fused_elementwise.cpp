// trainstep.fused_elementwise: a group of float32/bool pointwise ops run as
// one kernel over cache-sized tiles (made by passes/fuse_elementwise).
//
// attrs:
//   members: [{"name", "op", "attrs", "args": [ref, ...]}, ...] in execution
//            order; a ref is ["in", k] (the node's input k) or ["m", j] (the
//            value of an earlier member j). A member with no args whose op
//            makes a constant (OpDef::constant: trainstep.constant,
//            aten.scalar_tensor) is an immediate, evaluated once at compile
//            time.
//   outputs: [j, ...]: the node's outputs are these members' values.
// Inputs have the group's shape or one element; one-element inputs may have
// any dtype (cast to float32 as the member kernels would), the others are
// float32, bfloat16 or bool. Outputs have each member op's own dtype
// (float32/bfloat16/bool). Tiles hold float32; a member whose value is
// bfloat16 is rounded to it where it is computed, as eager rounds each op.
//
// infer re-runs every member op's infer on the member types, so a program
// with fused nodes verifies exactly like the unfused one.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/bf16_kernel.h"
#include "ops/broadcast.h"

namespace ts {

namespace {

constexpr int64_t kTile = 1024;  // floats per register: a few dozen fit in L1/L2
constexpr int kMaxArgs = 3;

// The group program with every member's context and type.
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

Group parse_group_attrs(const NodeCtx& ctx) {
  const json& ms = ctx.attrs().at("members");
  if (!ms.is_array() || ms.empty()) ctx.fail("attr members must be a non-empty list");
  Group g;
  const int n = static_cast<int>(ms.size());
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
        if (i < 0 || !ctx.has_input(i)) ctx.fail(where + ": no input " + std::to_string(i));
        args.push_back(-(i + 1));
        types.push_back(ctx.input(i));
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
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (t.numel() == 1) continue;
    if (t.numel() != numel || (t.dtype != DType::F32 && t.dtype != DType::Bool && t.dtype != DType::BF16))
      ctx.fail("input " + std::to_string(i) + " is " + t.str() +
               "; fused inputs are float32/bfloat16/bool of the group's numel, or one element");
  }
  for (const json& o : ctx.attrs().at("outputs")) {
    const int j = o.get<int>();
    if (j < 0 || j >= n || g.is_const[j]) ctx.fail("bad output member " + std::to_string(j));
    g.outputs.push_back(j);
  }
  return g;
}

// The members/outputs attributes are JSON read with nlohmann's checked
// accessors: a malformed one (missing key, wrong type) becomes a node error.
Group parse_group(const NodeCtx& ctx) {
  try {
    return parse_group_attrs(ctx);
  } catch (const json::exception& e) {
    ctx.fail(std::string("malformed members/outputs attribute: ") + e.what());
  }
}

std::vector<TensorType> fused_infer(const NodeCtx& ctx) {
  Group g = parse_group(ctx);
  std::vector<TensorType> r;
  for (int j : g.outputs) r.push_back({g.type[j].dtype, g.type[j].shape});
  return r;
}

struct FusedKernel : Kernel {
  // Value slots: the node's inputs [0, ni), then the members [ni, ni + nm).
  enum Kind { InFloat, InBool, InBf16, Shared, Reg };
  struct Slot {
    Kind kind = Reg;
    int reg = -1;     // Reg / InBool: register index
    int shared = -1;  // Shared: index of its broadcast tile
    int out = -1;     // member value that is output `out`
  };
  struct Step {
    std::unique_ptr<TileOp> op;
    int args[kMaxArgs] = {};
    int nargs = 0;
    int dst = 0;  // slot
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
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<Out> outs;
  std::vector<int> in_shared;      // input -> shared tile, or -1 (full-size input)
  std::vector<int> last_read;      // input -> last step reading it (-1: only at tile start)
  Buffer shared;                   // nshared * kTile floats: constants and 0-d inputs
  Buffer regs;                     // nthr * nregs * kTile floats
  std::vector<float*> ptrs;        // nthr * nslots: this tile's pointer per slot
  std::vector<char> direct;        // per output: computed straight into the output

  float* shared_tile(int s) const { return static_cast<float*>(shared.data()) + s * kTile; }

  void run(const Tensor* in, Tensor* out) override {
    if (numel == 0) return;
    // One-element inputs (lr, step counters...) change between runs.
    for (int k = 0; k < ni; ++k) {
      if (in_shared[k] < 0) continue;
      float v;
      cast_buffer(in[k].data, in[k].dtype, &v, DType::F32, 1);
      std::fill_n(shared_tile(in_shared[k]), kTile, v);
    }
    // A float32 output is written in place by its step unless it shares
    // memory with an input that a later step still reads.
    for (size_t o = 0; o < outs.size(); ++o) {
      direct[o] = !outs[o].is_bool && !outs[o].is_bf16 && out[o].data != nullptr;
      if (!direct[o]) continue;
      const char* ob = static_cast<const char*>(out[o].data);
      const char* oe = ob + out[o].nbytes();
      for (int k = 0; k < ni && direct[o]; ++k) {
        if (in_shared[k] >= 0 || last_read[k] <= outs[o].step) continue;
        const char* ib = static_cast<const char*>(in[k].data);
        if (ib < oe && ob < ib + in[k].nbytes()) direct[o] = 0;
      }
    }
    const int64_t ntiles = (numel + kTile - 1) / kTile;
    const int nslots = static_cast<int>(slots.size());
    // Each thread has its own registers and pointer row (thread 0's when the
    // loop runs on the calling thread); tiles are independent.
    parallel_region(numel > kParallelMin, [&](int t, int nt) {
      float* reg0 = static_cast<float*>(regs.data()) + static_cast<int64_t>(t) * nregs * kTile;
      float** P = ptrs.data() + static_cast<int64_t>(t) * nslots;
      int64_t tile0, tile1;
      split_range(ntiles, t, nt, tile0, tile1);
      for (int64_t tile = tile0; tile < tile1; ++tile) {
        const int64_t off = tile * kTile;
        const int64_t len = std::min(kTile, numel - off);
        for (int s = 0; s < nslots; ++s) {
          const Slot& sl = slots[s];
          switch (sl.kind) {
            case InFloat: P[s] = in[s].as<float>() + off; break;
            case InBool: {
              float* r = reg0 + sl.reg * kTile;
              // Read as bytes: GCC leaves a loop over bool loads scalar.
              const uint8_t* b = static_cast<const uint8_t*>(in[s].data) + off;
              for (int64_t i = 0; i < len; ++i) r[i] = b[i] != 0 ? 1.0f : 0.0f;
              P[s] = r;
              break;
            }
            case InBf16: {
              float* r = reg0 + sl.reg * kTile;
              bf16_to_floats(static_cast<const uint16_t*>(in[s].data) + off, r, len);
              P[s] = r;
              break;
            }
            case Shared: P[s] = shared_tile(sl.shared); break;
            case Reg:
              P[s] = sl.out >= 0 && direct[sl.out] ? out[sl.out].as<float>() + off
                                                    : reg0 + sl.reg * kTile;
              break;
          }
        }
        for (const Step& st : steps) {
          const float* a[kMaxArgs];
          for (int i = 0; i < st.nargs; ++i) a[i] = P[st.args[i]];
          st.op->run(a, P[st.dst], len);
          if (st.round_bf16) round_floats_to_bf16(P[st.dst], len);
        }
        for (size_t o = 0; o < outs.size(); ++o) {
          if (!out[o].data || direct[o]) continue;
          const float* r = P[outs[o].slot];
          if (outs[o].is_bool) {
            uint8_t* b = static_cast<uint8_t*>(out[o].data) + off;
            for (int64_t i = 0; i < len; ++i) b[i] = r[i] != 0.0f;
          } else if (outs[o].is_bf16) {  // rounded already: exact
            floats_to_bf16(r, static_cast<uint16_t*>(out[o].data) + off, len);
          } else {
            std::memcpy(out[o].as<float>() + off, r, static_cast<size_t>(len) * sizeof(float));
          }
        }
      }
    }, nthr);
  }
};

std::unique_ptr<Kernel> fused_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  Group g = parse_group(ctx);
  auto k = std::make_unique<FusedKernel>();
  const int ni = ctx.num_inputs(), nm = static_cast<int>(g.type.size());
  k->ni = ni;
  k->numel = shape_numel(g.shape);
  k->nthr = kc.threads > 0 ? kc.threads : omp_get_max_threads();
  k->slots.resize(ni + nm);
  k->in_shared.assign(ni, -1);
  k->last_read.assign(ni, -1);
  int nshared = 0;
  std::vector<float> shared_vals;  // constants' values (inputs: filled each run)

  // Slot kinds and the step index of each member.
  std::vector<int> step_of(nm, -1);
  for (int i = 0; i < ni; ++i) {
    auto& s = k->slots[i];
    if (ctx.input(i).numel() == 1) {
      s.kind = FusedKernel::Shared;
      s.shared = k->in_shared[i] = nshared++;
      shared_vals.push_back(0.0f);
    } else {
      const DType dt = ctx.input(i).dtype;
      s.kind = dt == DType::Bool   ? FusedKernel::InBool
               : dt == DType::BF16 ? FusedKernel::InBf16
                                   : FusedKernel::InFloat;
    }
  }
  for (int j = 0; j < nm; ++j) {
    auto& s = k->slots[ni + j];
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
      s.kind = FusedKernel::Shared;
      s.shared = nshared++;
      shared_vals.push_back(v);
    } else {
      s.kind = FusedKernel::Reg;
      step_of[j] = static_cast<int>(k->steps.size());
      FusedKernel::Step st;
      st.op = g.def[j]->make_tile(*g.twin[j]);
      if (!st.op) ctx.fail("member " + std::to_string(j) + " has no tile form");
      st.round_bf16 = g.type[j].dtype == DType::BF16;
      st.nargs = static_cast<int>(g.args[j].size());
      for (int a = 0; a < st.nargs; ++a) {
        const int v = g.args[j][a];
        st.args[a] = v >= 0 ? ni + v : -(v + 1);
        if (v < 0) k->last_read[-(v + 1)] = step_of[j];
      }
      st.dst = ni + j;
      k->steps.push_back(std::move(st));
    }
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const int j = g.outputs[o];
    FusedKernel::Out out;
    out.slot = ni + j;
    out.step = step_of[j];
    out.is_bool = g.type[j].dtype == DType::Bool;
    out.is_bf16 = g.type[j].dtype == DType::BF16;
    k->outs.push_back(out);
    if (k->slots[ni + j].out < 0) k->slots[ni + j].out = static_cast<int>(o);
  }
  // A bfloat16 member no step reads is rounded by its output's conversion
  // (floats_to_bf16 rounds the same way): one pass over the tile, not two.
  {
    std::vector<bool> read(ni + nm, false);
    for (const auto& st : k->steps)
      for (int a = 0; a < st.nargs; ++a) read[st.args[a]] = true;
    for (auto& st : k->steps)
      if (!read[st.dst]) st.round_bf16 = false;
  }
  // (A member listed as two outputs is computed into the first; the second
  // is copied from it at the tile end.)
  // Registers: bool inputs live from the tile start to their last read;
  // members from their step to their last read (outputs: to the tile end).
  const int nsteps = static_cast<int>(k->steps.size());
  std::vector<int> last(ni + nm, -1);
  for (int s = 0; s < nsteps; ++s)
    for (int a = 0; a < k->steps[s].nargs; ++a) last[k->steps[s].args[a]] = s;
  for (const auto& o : k->outs) last[o.slot] = nsteps;
  std::vector<int> free_regs;
  auto take = [&]() {
    if (free_regs.empty()) return k->nregs++;
    int r = free_regs.back();
    free_regs.pop_back();
    return r;
  };
  for (int i = 0; i < ni; ++i)
    if (k->slots[i].kind == FusedKernel::InBool || k->slots[i].kind == FusedKernel::InBf16)
      k->slots[i].reg = take();
  for (int s = 0; s < nsteps; ++s) {
    const auto& st = k->steps[s];
    k->slots[st.dst].reg = take();  // before freeing: a step never writes over its args
    for (int a = 0; a < st.nargs; ++a) {
      const int v = st.args[a];
      bool dup = false;
      for (int b = 0; b < a; ++b) dup = dup || st.args[b] == v;
      if (!dup && last[v] == s && k->slots[v].reg >= 0 &&
          (k->slots[v].kind == FusedKernel::Reg || k->slots[v].kind == FusedKernel::InBool ||
           k->slots[v].kind == FusedKernel::InBf16))
        free_regs.push_back(k->slots[v].reg);
    }
    if (last[st.dst] < s) free_regs.push_back(k->slots[st.dst].reg);  // never read
  }
  k->shared = Buffer(static_cast<size_t>(std::max(nshared, 1)) * kTile * sizeof(float));
  for (int s = 0; s < nshared; ++s) std::fill_n(k->shared_tile(s), kTile, shared_vals[s]);
  k->regs = Buffer(static_cast<size_t>(k->nthr) * std::max(k->nregs, 1) * kTile * sizeof(float));
  k->ptrs.assign(static_cast<size_t>(k->nthr) * k->slots.size(), nullptr);
  k->direct.assign(k->outs.size(), 0);
  return k;
}

}  // namespace

void register_fused_ops(OpRegistry& r) {
  OpDef fused{"trainstep.fused_elementwise",
              "a group of float32/bfloat16/bool pointwise ops run as one kernel over float32 tiles, each bfloat16 value rounded where it is computed (attrs members, outputs; made by the fusion pass)",
              &fused_infer, &fused_make, false, nullptr, true};
  fused.bf16 = Bf16::Native;
  r.add(std::move(fused));
}

}  // namespace ts

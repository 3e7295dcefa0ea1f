// Host side of the pointwise kernels: every elementwise op (each OpDef with
// a pointwise code), and each trainstep.fused_elementwise group, becomes a
// pw::Program (pointwise.h) built once at compile time and launched by run().
#include <cstring>

#include "cuda/kernel.h"
#include "cuda/pointwise.h"
#include "ops/broadcast.h"

namespace ts::cuda {

namespace {

using pw::Program;

uint8_t type_code(DType t) { return static_cast<uint8_t>(t); }  // same order

// The device instruction of each op code (ops/op.h's PwCode).
pw::Op device_op(PwCode c) {
  switch (c) {
    case PwCode::Add: return pw::Add;
    case PwCode::Sub: return pw::Sub;
    case PwCode::Mul: return pw::Mul;
    case PwCode::Div: return pw::Div;
    case PwCode::Max: return pw::Max;
    case PwCode::Min: return pw::Min;
    case PwCode::Pow: return pw::Pow;
    case PwCode::PowScalar: return pw::PowScalar;
    case PwCode::Eq: return pw::Eq;
    case PwCode::Ne: return pw::Ne;
    case PwCode::Lt: return pw::Lt;
    case PwCode::Le: return pw::Le;
    case PwCode::Gt: return pw::Gt;
    case PwCode::Ge: return pw::Ge;
    case PwCode::Where:
    case PwCode::MaskedFill: return pw::Where;
    case PwCode::Neg: return pw::Neg;
    case PwCode::Exp: return pw::Exp;
    case PwCode::Expm1: return pw::Expm1;
    case PwCode::Log: return pw::Log;
    case PwCode::Log1p: return pw::Log1p;
    case PwCode::Sqrt: return pw::Sqrt;
    case PwCode::Rsqrt: return pw::Rsqrt;
    case PwCode::Abs: return pw::Abs;
    case PwCode::Relu: return pw::Relu;
    case PwCode::Sigmoid: return pw::Sigmoid;
    case PwCode::Tanh: return pw::Tanh;
    case PwCode::Cos: return pw::Cos;
    case PwCode::Sin: return pw::Sin;
    case PwCode::Reciprocal: return pw::Reciprocal;
    case PwCode::Sign: return pw::Sign;
    case PwCode::Erf: return pw::Erf;
    case PwCode::Gelu: return pw::Gelu;
    case PwCode::Cast: return pw::Cast;
    case PwCode::Clamp: return pw::Clamp;
    case PwCode::None: break;
  }
  fail("CUDA: pointwise op code without an instruction");
}

bool is_cmp(pw::Op op) { return op >= pw::Eq && op <= pw::Ge; }

// Builds a program over SSA values (one per instruction), then gives
// each a register that is free again after its last use.
class Builder {
 public:
  explicit Builder(const NodeCtx& node) : node_(node) {}

  int load(int input) { return emit(pw::Load, pw::F32, pw::F32, {input, -1, -1}); }
  int constant(double v, DType t) {
    pw::Instr I;
    I.op = pw::Const;
    I.out = type_code(t);
    I.s = v;
    return push(I);
  }

  // One op (a node, or a member of a fused group) over SSA operands.
  int op(const OpDef& def, const NodeCtx& ctx, const std::vector<int>& args,
         const std::vector<TensorType>& types, const TensorType& out) {
    const Pointwise& form = def.pointwise;
    if (form.code == PwCode::None) node_.fail("CUDA: " + ctx.op() + " has no pointwise form");
    const pw::Op kind = device_op(form.code);
    std::vector<int> a = args;
    std::vector<TensorType> t = types;
    if (form.scalar_attr) {  // the attribute is the last operand
      const TensorType st = scalar_attr_type(ctx, form.scalar_attr);
      a.push_back(constant(ctx.attr_float(form.scalar_attr), st.dtype));
      t.push_back(st);
    }
    pw::Instr I;
    I.op = kind;
    I.out = type_code(out.dtype);
    if (is_cmp(kind)) {
      I.ct = type_code(compute_dtype(result_type(t)));
    } else if (kind == pw::Cast) {
      I.ct = pw::F64;  // the value as is; rounding to `out` converts it
    } else {
      I.ct = type_code(compute_dtype(out.dtype));
    }
    if (kind == pw::Add || kind == pw::Sub)
      I.alpha = ctx.has_attr("alpha") ? ctx.attr_float("alpha") : 1.0;
    if (kind == pw::PowScalar) I.s = ctx.attr_float("exponent");
    if (kind == pw::Clamp) {  // bounds as attrs; either may be absent
      if (ctx.has_attr("min")) I.flags |= 1, I.s = ctx.attr_float("min");
      if (ctx.has_attr("max")) I.flags |= 2, I.alpha = ctx.attr_float("max");
    }
    const bool float_ct = I.ct == pw::F32 || I.ct == pw::F64;
    if ((kind == pw::Pow || kind == pw::PowScalar || (kind >= pw::Exp && kind <= pw::Gelu &&
         kind != pw::Abs && kind != pw::Relu && kind != pw::Sign)) && !float_ct)
      node_.fail("CUDA: " + ctx.op() + " in " + dtype_name(out.dtype) + " is not supported");
    if (kind == pw::Gelu && ctx.has_attr("approximate") && ctx.attr_str("approximate") == "tanh")
      I.op = pw::GeluTanh;
    if (form.code == PwCode::MaskedFill) {
      a = {a[1], a[2], a[0]};  // mask ? value : self
    }
    if (a.size() > 3) node_.fail("CUDA: too many operands for " + ctx.op());
    for (size_t k = 0; k < a.size(); ++k) I.a[k] = static_cast<int16_t>(a[k]);
    return push(I);
  }

  void output(int value, int slot) { outs_.push_back({value, slot}); }

  // Register allocation and the finished program (inputs and outputs'
  // pointers are filled per run).
  Program finish() {
    Program p;
    const int n = static_cast<int>(code_.size());
    if (n > pw::kMaxInstr) node_.fail("CUDA: fused group of " + std::to_string(n) + " instructions, over " + std::to_string(pw::kMaxInstr));
    std::vector<int> last(n, -1);
    for (int k = 0; k < n; ++k)
      if (code_[k].op != pw::Load)
        for (int16_t v : code_[k].a)
          if (v >= 0) last[v] = k;
    for (auto& [v, slot] : outs_) last[v] = n;  // outputs live to the end
    std::vector<int> reg(n, -1);
    std::vector<bool> busy(pw::kMaxRegs, false);
    for (int k = 0; k < n; ++k) {
      pw::Instr I = code_[k];
      if (I.op != pw::Load)
        for (auto& v : I.a)
          if (v >= 0) v = static_cast<int16_t>(reg[v]);
      // Operands whose last use is here are free for this result.
      if (code_[k].op != pw::Load)
        for (int16_t v : code_[k].a)
          if (v >= 0 && last[v] == k) busy[reg[v]] = false;
      int r = 0;
      while (r < pw::kMaxRegs && busy[r]) ++r;
      if (r == pw::kMaxRegs) node_.fail("CUDA: fused group needs more than " + std::to_string(pw::kMaxRegs) + " registers");
      if (last[k] >= 0) busy[r] = true;  // unused results free at once
      reg[k] = r;
      I.dst = static_cast<uint8_t>(r);
      p.code[k] = I;
    }
    p.n_instr = n;
    for (auto& [v, slot] : outs_) {
      if (slot >= pw::kMaxOutputs) node_.fail("CUDA: too many fused outputs");
      p.out[slot].reg = static_cast<uint8_t>(reg[v]);
      p.n_out = std::max(p.n_out, slot + 1);
    }
    return p;
  }

 private:
  int emit(pw::Op op, uint8_t ct, uint8_t out, std::array<int, 3> a) {
    pw::Instr I;
    I.op = op;
    I.ct = ct;
    I.out = out;
    for (int k = 0; k < 3; ++k) I.a[k] = static_cast<int16_t>(a[k]);
    return push(I);
  }
  int push(const pw::Instr& I) {
    code_.push_back(I);
    return static_cast<int>(code_.size()) - 1;
  }
  const NodeCtx& node_;
  std::vector<pw::Instr> code_;
  std::vector<std::pair<int, int>> outs_;
};

// How input `t` is read in an output of shape `out`.
// A fused group's inputs have its numel (any shape) or one element.
pw::Input input_desc(const NodeCtx& node, const TensorType& t, const Shape& out, bool fused) {
  pw::Input in;
  in.type = type_code(t.dtype);
  if (t.shape == out || (fused && t.numel() == shape_numel(out))) {
    in.kind = 0;
  } else if (t.numel() == 1) {
    in.kind = 1;
  } else {
    in.kind = 2;
    const int r = static_cast<int>(out.size()), tr = static_cast<int>(t.shape.size());
    if (tr > r) node.fail("CUDA: input " + t.str() + " does not broadcast to " + shape_str(out));
    std::vector<int64_t> st = contiguous_strides(t.shape);
    for (int d = 0; d < r; ++d) {
      const int td = d - (r - tr);
      in.at.stride[d] = td < 0 || t.shape[td] == 1 ? 0 : st[td];
    }
  }
  return in;
}

class PointwiseKernel : public Kernel {
 public:
  explicit PointwiseKernel(Program p) : p_(p) {}
  void run(const Tensor* in, Tensor* out, const Ctx& c) override {
    bool any = false;
    for (int j = 0; j < p_.n_out; ++j) {
      p_.out[j].data = out[j].data;
      any = any || out[j].data;
    }
    if (!any) return;
    for (int k = 0; k < p_.n_in; ++k) p_.in[k].data = in[k].data;
    pw::launch(p_, c.stream);
    check_launch("pointwise");
  }

 private:
  Program p_;
};

// The output shape and per-input read pattern shared by both forms.
void set_shape(Program& p, const NodeCtx& node, const Shape& out, bool fused) {
  if (out.size() > static_cast<size_t>(kMaxRank)) node.fail("CUDA: rank over " + std::to_string(kMaxRank));
  p.numel = shape_numel(out);
  p.rank = static_cast<int>(out.size());
  for (int d = 0; d < p.rank; ++d) p.shape[d] = out[d];
  if (node.num_inputs() > pw::kMaxInputs) node.fail("CUDA: too many inputs for a pointwise kernel");
  p.n_in = node.num_inputs();
  for (int k = 0; k < p.n_in; ++k) {
    p.in[k] = input_desc(node, node.input(k), out, fused);
    p.strided = p.strided || p.in[k].kind == 2;
  }
}

std::unique_ptr<Kernel> make_single(const Build& b) {
  const NodeCtx& node = b.node();
  Builder bl(node);
  std::vector<int> args;
  std::vector<TensorType> types;
  for (int k = 0; k < node.num_inputs(); ++k) {
    args.push_back(bl.load(k));
    types.push_back(node.input(k));
  }
  bl.output(bl.op(b.op(), node, args, types, b.outputs()[0]), 0);
  Program p = bl.finish();
  set_shape(p, node, b.outputs()[0].shape, false);
  p.out[0].type = type_code(b.outputs()[0].dtype);
  return std::make_unique<PointwiseKernel>(p);
}

// A 0-d constant member (trainstep.constant, scalar_tensor): its value,
// computed once by the op's own CPU kernel.
double immediate_value(const OpDef& def, const NodeCtx& ctx, const TensorType& t) {
  std::vector<TensorType> outs{t};
  KernelCtx kc{ctx, outs, 1};
  HostTensor v(t.dtype, t.shape);
  Tensor o = v.view;
  def.make(kc)->run(nullptr, &o);
  switch (t.dtype) {
    case DType::F32: return *v.view.as<float>();
    case DType::F64: return *v.view.as<double>();
    case DType::I64: return double(*v.view.as<int64_t>());
    case DType::I32: return *v.view.as<int32_t>();
    default: return *v.view.as<uint8_t>();
  }
}

std::unique_ptr<Kernel> make_fused(const Build& b) {
  const NodeCtx& node = b.node();
  const json& ms = node.attrs().at("members");
  Builder bl(node);
  std::vector<int> in_value(node.num_inputs(), -1);
  std::vector<int> member_value;
  std::vector<TensorType> member_type;
  for (size_t j = 0; j < ms.size(); ++j) {
    const json& m = ms[j];
    const std::string op = m.at("op").get<std::string>();
    const OpDef* def = OpRegistry::get().find(op);
    if (!def) node.fail("CUDA: member " + std::to_string(j) + ": unknown op " + op);
    std::vector<int> args;
    std::vector<TensorType> types;
    for (const json& a : m.at("args")) {
      const int i = a.at(1).get<int>();
      if (a.at(0).get<std::string>() == "in") {
        if (in_value[i] < 0) in_value[i] = bl.load(i);
        args.push_back(in_value[i]);
        types.push_back(node.input(i));
      } else {
        args.push_back(member_value.at(i));
        types.push_back(member_type.at(i));
      }
    }
    NodeCtx ctx(node.node() + "/" + m.value("name", op), op, m.at("attrs"), types,
                std::vector<bool>(types.size(), true));
    const TensorType out = def->infer(ctx).at(0);
    int v;
    if (def->constant != ConstRole::None && args.empty()) {
      v = bl.constant(immediate_value(*def, ctx, out), out.dtype);
    } else {
      v = bl.op(*def, ctx, args, types, out);
    }
    member_value.push_back(v);
    TensorType mt = out;
    if (def->constant == ConstRole::None || !args.empty()) mt.wrapped = false;
    member_type.push_back(mt);
  }
  const json& outs = node.attrs().at("outputs");
  for (size_t o = 0; o < outs.size(); ++o) bl.output(member_value.at(outs[o].get<int>()), int(o));
  Program p = bl.finish();
  set_shape(p, node, b.outputs()[0].shape, true);
  for (size_t o = 0; o < outs.size(); ++o) p.out[o].type = type_code(b.outputs()[o].dtype);
  return std::make_unique<PointwiseKernel>(p);
}

}  // namespace

void register_pointwise(KernelTable& t) {
  for (const OpDef& d : OpRegistry::get().all())
    if (d.pointwise.code != PwCode::None) t.add(d, &make_single);
  t.add("trainstep.fused_elementwise", &make_fused);
}

}  // namespace ts::cuda

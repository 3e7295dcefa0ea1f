// Constant-producing ops. Each kernel writes its constant every run (a fill
// is cheap and keeps outputs independent of buffer reuse) — nothing is hoisted.
#include <cmath>

#include "ops/broadcast.h"
#include "ops/creation.h"

namespace ts {

namespace {

// A scalar attribute with its natural dtype: bool, int64 or float.
struct Scalar {
  double d = 0;
  int64_t i = 0;
  DType natural = DType::F32;  // bool / int64 / float32
};

Scalar scalar_attr(const NodeCtx& ctx, const std::string& key) {
  Scalar s;
  s.d = ctx.attr_float(key);  // fails, naming the node, when absent or not a number
  const json& v = ctx.attrs().at(key);
  if (v.is_boolean() || v.is_number_integer()) {
    s.i = ctx.attr_int(key);
    s.natural = v.is_boolean() ? DType::Bool : DType::I64;
  } else {
    s.i = int_of_float(s.d);
    s.natural = DType::F32;
  }
  return s;
}

Shape size_attr(const NodeCtx& ctx, const char* key) {
  Shape s = ctx.attr_ints(key);
  for (int64_t d : s)
    if (d < 0) ctx.fail("negative size in " + shape_str(s));
  return s;
}

struct FillKernel : Kernel {
  alignas(16) unsigned char value[16] = {};
  void run(const Tensor*, Tensor* out) override {
    if (out[0].data) fill_bytes(out[0].data, value, dtype_size(out[0].dtype), out[0].numel());
  }
};

std::unique_ptr<Kernel> fill_kernel(DType t, const Scalar& s) {
  auto k = std::make_unique<FillKernel>();
  store_scalar(k->value, t, s.d, s.i);
  return k;
}

// Where each op finds its value, dtype and shape.
enum class Cr { Constant, ScalarTensor, NewFull, NewZeros, NewOnes, Full, Zeros, FullLike, ZerosLike, OnesLike };

Scalar value_of(const NodeCtx& ctx, Cr op) {
  switch (op) {
    case Cr::Constant: return scalar_attr(ctx, "value");
    case Cr::ScalarTensor: return scalar_attr(ctx, "s");
    case Cr::NewFull: case Cr::Full: case Cr::FullLike: return scalar_attr(ctx, "fill_value");
    case Cr::NewOnes: case Cr::OnesLike: return {1.0, 1, DType::I64};
    default: return {0.0, 0, DType::I64};
  }
}

template <Cr OP>
std::vector<TensorType> cr_infer(const NodeCtx& ctx) {
  const bool has_self = OP == Cr::NewFull || OP == Cr::NewZeros || OP == Cr::NewOnes ||
                        OP == Cr::FullLike || OP == Cr::ZerosLike || OP == Cr::OnesLike;
  ctx.expect_inputs(has_self ? 1 : 0);
  Scalar v = value_of(ctx, OP);
  auto dt = ctx.attr_dtype("dtype");
  TensorType t;
  if (OP == Cr::Constant) {
    t.wrapped = ctx.has_attr("wrapped") && ctx.attr_bool("wrapped");
    // A wrapped Python float is a double in PyTorch; promotion treats it as
    // the default dtype anyway.
    DType nat = v.natural == DType::F32 && t.wrapped ? DType::F64 : v.natural;
    t.dtype = dt.value_or(nat);
  } else if (OP == Cr::ScalarTensor) {
    t.dtype = dt.value_or(DType::F32);
  } else if (OP == Cr::Full) {
    t.dtype = dt.value_or(v.natural);
    t.shape = size_attr(ctx, "size");
  } else if (OP == Cr::Zeros) {
    t.dtype = dt.value_or(DType::F32);
    t.shape = size_attr(ctx, "size");
  } else if (OP == Cr::NewFull || OP == Cr::NewZeros || OP == Cr::NewOnes) {
    t.dtype = dt.value_or(ctx.input(0).dtype);
    t.shape = size_attr(ctx, "size");
  } else {
    t.dtype = dt.value_or(ctx.input(0).dtype);
    t.shape = ctx.input(0).shape;
  }
  return {t};
}

template <Cr OP>
std::unique_ptr<Kernel> cr_make(const KernelCtx& kc) {
  return fill_kernel(kc.outputs[0].dtype, value_of(kc.node, OP));
}

// ---- arange: start + i * step, computed in double then cast ----
constexpr double kMaxArange = 0x1p40;  // the element limit of a program's shapes
struct Range {
  double start = 0, end = 0, step = 1;
  bool is_float = false;
};

Range range_attrs(const NodeCtx& ctx) {
  Range r;
  auto num = [&](const char* k, double def) {
    if (!ctx.has_attr(k)) return def;
    if (ctx.attrs().at(k).is_number_float()) r.is_float = true;
    return ctx.attr_float(k);
  };
  r.start = num("start", 0);
  r.end = num("end", 0);
  r.step = num("step", 1);
  if (r.step == 0) ctx.fail("arange step must be nonzero");
  if (!std::isfinite(r.start) || !std::isfinite(r.end)) ctx.fail("arange bounds must be finite");
  if (!std::isfinite(r.step)) ctx.fail("arange step must be finite");
  if ((r.end - r.start) / r.step < 0) ctx.fail("arange: step has the wrong sign for start/end");
  // The count in double first: converting a larger one to int64 is undefined.
  if (!(std::ceil((r.end - r.start) / r.step) <= kMaxArange))
    ctx.fail("arange has more than 2^40 elements");
  return r;
}

std::vector<TensorType> arange_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(0);
  Range r = range_attrs(ctx);
  int64_t n = static_cast<int64_t>(std::ceil((r.end - r.start) / r.step));
  DType dt = ctx.attr_dtype("dtype").value_or(r.is_float ? DType::F32 : DType::I64);
  return {{dt, {n}}};
}

std::unique_ptr<Kernel> arange_make(const KernelCtx& kc) {
  Range r = range_attrs(kc.node);
  return make_fn_kernel([r](const Tensor*, Tensor* out) {
    if (!out[0].data) return;
    dispatch_dtype(out[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = out[0].as<T>();
      const int64_t n = out[0].numel();
      for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(r.start + static_cast<double>(i) * r.step);
    });
  });
}

template <Cr OP>
OpDef cr_def(const std::string& name, const std::string& doc) {
  return OpDef{name, doc, &cr_infer<OP>, &cr_make<OP>, false};
}

// The *_like and new_* ops read only self's shape and dtype.
OpDef shape_only(OpDef d) {
  d.shape_only = true;
  return d;
}

}  // namespace

void register_creation_ops(OpRegistry& r) {
  OpDef constant = cr_def<Cr::Constant>("trainstep.constant",
                             "0-d tensor of attr value (number, bool, \"inf\"/\"-inf\"/\"nan\"), attr dtype (null: bool/int64, float32 or float64 if wrapped), attr wrapped");
  constant.constant = ConstRole::Literal;
  r.add(std::move(constant));
  OpDef scalar = cr_def<Cr::ScalarTensor>("aten.scalar_tensor.default", "0-d tensor of attr s; dtype default float32");
  scalar.constant = ConstRole::Immediate;
  r.add(std::move(scalar));
  r.add(shape_only(cr_def<Cr::NewFull>("aten.new_full.default", "tensor of attr size filled with fill_value; dtype null -> self's")));
  r.add(shape_only(cr_def<Cr::NewZeros>("aten.new_zeros.default", "zeros of attr size; dtype null -> self's")));
  r.add(shape_only(cr_def<Cr::NewOnes>("aten.new_ones.default", "ones of attr size; dtype null -> self's")));
  r.add(cr_def<Cr::Full>(opname::full, "tensor of attr size filled with fill_value; dtype null -> float32/int64/bool by the value"));
  r.add(cr_def<Cr::Zeros>(opname::zeros, "zeros of attr size; dtype null -> float32"));
  r.add(shape_only(cr_def<Cr::FullLike>("aten.full_like.default", "self-shaped tensor of fill_value; dtype null -> self's")));
  r.add(shape_only(cr_def<Cr::ZerosLike>("aten.zeros_like.default", "self-shaped zeros; dtype null -> self's")));
  r.add(shape_only(cr_def<Cr::OnesLike>("aten.ones_like.default", "self-shaped ones; dtype null -> self's")));
  r.add(OpDef{opname::arange_start_step, "start + i*step for i < ceil((end-start)/step), in double then cast; dtype null -> int64, or float32 if any bound is float",
              &arange_infer, &arange_make, false});
  r.add(OpDef{opname::arange, "0, 1, ..., ceil(end)-1; dtype null -> int64, or float32 if end is float",
              &arange_infer, &arange_make, false});
}

}  // namespace ts

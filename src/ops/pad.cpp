// Padding ops. constant_pad_nd copies self into a frame of one value (or
// crops it, for negative pads: its autograd backward is constant_pad_nd with
// the pads negated). Reflection and replication pads gather through
// per-dim index tables built at make time; their backward ops scatter-add
// grad_output through the same tables, one input row per task, so no two
// threads add into the same element and sums keep torch's order (output
// rows, then columns, ascending).
#include <algorithm>
#include <cmath>

#include "ops/broadcast.h"

namespace ts {

namespace {

// ---- constant_pad_nd ----
struct ConstPadArgs {
  Shape out;
  std::vector<int64_t> before;  // pad before each dim (0 where unpadded; negative crops)
};

ConstPadArgs const_pad_args(const NodeCtx& ctx) {
  const TensorType& t = ctx.input(0);
  const auto pad = ctx.attr_ints("pad");
  const int64_t r = rank_of(t);
  if (pad.size() % 2) ctx.fail("pad " + shape_str(pad) + " must have an even number of values");
  const int64_t k = static_cast<int64_t>(pad.size()) / 2;
  if (k > r)
    ctx.fail("pad " + shape_str(pad) + " pads " + std::to_string(k) + " dims of " + t.str());
  ConstPadArgs a{t.shape, std::vector<int64_t>(r, 0)};
  for (int64_t i = 0; i < k; ++i) {  // pad[0], pad[1] are the last dim's
    const int64_t d = r - 1 - i, lo = pad[2 * i], hi = pad[2 * i + 1];
    int64_t n = 0;
    if (__builtin_add_overflow(t.shape[d], lo, &n) || __builtin_add_overflow(n, hi, &n) || n < 0)
      ctx.fail("pads (" + std::to_string(lo) + ", " + std::to_string(hi) + ") make dim " +
               std::to_string(d) + " of " + t.str() + " negative");
    a.out[d] = n;
    a.before[d] = lo;
  }
  return a;
}

std::string value_str(const NodeCtx& ctx) {
  const json& v = ctx.attrs().at("value");
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The fill value stored in dtype t. torch's fill_ refuses a value the dtype
// cannot hold; so do we (a silent wrap would hide a bad model).

void pad_value(const NodeCtx& ctx, DType t, void* dst) {
  double d = 0;
  int64_t i = 0;
  bool is_int = true;
  if (ctx.has_attr("value")) {
    d = ctx.attr_float("value");
    const json& v = ctx.attrs().at("value");
    is_int = v.is_boolean() || v.is_number_integer();
    if (is_int) i = ctx.attr_int("value");
  }
  if (dtype_is_int(t)) {
    double lo = -0x1p63, hi = 0x1p63;  // allowed: lo <= value < hi
    if (t == DType::I32) lo = -0x1p31, hi = 0x1p31;
    if (t == DType::U8) lo = -255, hi = 256;  // negatives wrap, as torch allows
    const double x = is_int ? static_cast<double>(i) : std::trunc(d);
    const bool ok = (is_int && t == DType::I64) || (std::isfinite(d) && x >= lo && x < hi);
    if (!ok)
      ctx.fail("value " + value_str(ctx) + " cannot be converted to " + dtype_name(t) +
               " without overflow");
    if (!is_int) i = static_cast<int64_t>(x);
  }
  if (t == DType::F32 && std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max())
    ctx.fail("value " + value_str(ctx) + " cannot be converted to float32 without overflow");
  store_scalar(dst, t, d, i);
}

std::vector<TensorType> const_pad_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  ConstPadArgs a = const_pad_args(ctx);
  alignas(16) unsigned char v[16];
  pad_value(ctx, ctx.input(0).dtype, v);
  return {{ctx.input(0).dtype, a.out}};
}

// Each output row (last dim) is either outside self in some outer dim (all
// value) or a frame around one of self's rows: [0, j0) value, [j0, j1) a
// copy, [j1, W) value.
struct ConstPadKernel : Kernel {
  int rank = 0;  // outer dims (all but the last)
  int64_t oshape[kMaxDims] = {}, before[kMaxDims] = {}, ishape[kMaxDims] = {}, istride[kMaxDims] = {};
  int64_t W = 1, IW = 1, j0 = 0, j1 = 0, src0 = 0, rows = 0;
  alignas(16) unsigned char value[16] = {};
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    by_size(dtype_size(out[0].dtype), [&](auto tag) {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, value, sizeof(T));
      const T* x = static_cast<const T*>(in[0].data);
      T* o = static_cast<T*>(out[0].data);
      parallel_for(rows, rows * W > kParallelMin && rows > 1, [&](int64_t q) {
        T* po = o + q * W;
        int64_t off = 0;
        bool inside = true;
        for (int d = rank - 1; d >= 0; --d) {
          const int64_t s = q % oshape[d] - before[d];
          q /= oshape[d];
          if (s < 0 || s >= ishape[d]) inside = false;
          off += s * istride[d];
        }
        if (!inside) {
          std::fill(po, po + W, v);
          return;
        }
        std::fill(po, po + j0, v);
        if (j1 > j0) std::memcpy(po + j0, x + off * IW + src0, sizeof(T) * (j1 - j0));
        std::fill(po + j1, po + W, v);
      });
    });
  }
};

std::unique_ptr<Kernel> const_pad_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  ConstPadArgs a = const_pad_args(ctx);
  const Shape& in = ctx.input(0).shape;
  auto k = std::make_unique<ConstPadKernel>();
  pad_value(ctx, ctx.input(0).dtype, k->value);
  const int r = static_cast<int>(in.size());
  if (r > kMaxDims + 1) ctx.fail("too many dims");
  if (r == 0) {  // a 0-d self: one element, copied
    k->j1 = 1;
    k->rows = 1;
    return k;
  }
  k->rank = r - 1;
  int64_t st = 1;
  for (int d = r - 2; d >= 0; --d) {  // strides in rows of self
    k->oshape[d] = a.out[d];
    k->before[d] = a.before[d];
    k->ishape[d] = in[d];
    k->istride[d] = st;
    st *= in[d];
  }
  k->W = a.out[r - 1];
  k->IW = in[r - 1];
  const int64_t lo = a.before[r - 1];
  k->j0 = std::min(std::max<int64_t>(lo, 0), k->W);
  k->j1 = std::max(k->j0, std::min(k->W, k->IW + lo));
  k->src0 = k->j0 - lo;
  k->rows = k->W ? shape_numel(a.out) / k->W : 0;
  return k;
}

// ---- reflection / replication pads ----
// self is [planes, H, W] (1d: H = 1) after folding batch and channel dims.
struct MirrorArgs {
  int64_t planes = 1, H = 1, W = 1, OH = 1, OW = 1;
  int64_t left = 0, top = 0;  // pads before W and H (negative crops)
  Shape out;
};

// dims: 1 or 2 padded dims; reflect: pads must be less than the size.
MirrorArgs mirror_args(const NodeCtx& ctx, const TensorType& t, int dims, bool reflect) {
  const int64_t r = rank_of(t);
  if (!dtype_is_float(t.dtype))
    ctx.fail("takes float32, float64 or bfloat16, got " + t.str());
  if (r != dims + 1 && r != dims + 2)
    ctx.fail("expects a " + std::to_string(dims + 1) + "-d or " + std::to_string(dims + 2) +
             "-d (batched) input, got " + t.str());
  for (int64_t d = r - dims - 1; d < r; ++d)
    if (t.shape[d] == 0) ctx.fail("expects non-empty dims besides the batch dim, got " + t.str());
  const auto pad = ctx.attr_ints("padding");
  if (static_cast<int>(pad.size()) != 2 * dims)
    ctx.fail("padding " + shape_str(pad) + " must have " + std::to_string(2 * dims) + " values");
  MirrorArgs a;
  a.out = t.shape;
  for (int i = 0; i < dims; ++i) {  // pad[0], pad[1]: W; pad[2], pad[3]: H
    const int64_t d = r - 1 - i, n = t.shape[d], lo = pad[2 * i], hi = pad[2 * i + 1];
    const char* name = i == 0 ? "W" : "H";
    if (reflect && (lo >= n || hi >= n))
      ctx.fail("padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
               ") must be less than the size " + std::to_string(n) + " of dim " + std::to_string(d) +
               " of " + t.str());
    int64_t m = 0;
    if (__builtin_add_overflow(n, lo, &m) || __builtin_add_overflow(m, hi, &m) || m < 1)
      ctx.fail("input (" + std::string(name) + ": " + std::to_string(n) + ") is too small for padding (" +
               std::to_string(lo) + ", " + std::to_string(hi) + "): output " + name + " would be " +
               std::to_string(m));
    a.out[d] = m;
    (i == 0 ? a.left : a.top) = lo;
  }
  a.W = t.shape[r - 1];
  a.OW = a.out[r - 1];
  if (dims == 2) {
    a.H = t.shape[r - 2];
    a.OH = a.out[r - 2];
  }
  a.planes = shape_numel(Shape(t.shape.begin(), t.shape.end() - dims));
  return a;
}

// Input index of each output index along a dim of size n padded by lo before.
std::vector<int64_t> mirror_index(int64_t n, int64_t lo, int64_t on, bool reflect) {
  std::vector<int64_t> idx(on);
  for (int64_t j = 0; j < on; ++j) {
    int64_t x = j - lo;
    if (reflect) {
      if (x < 0) x = -x;
      if (x >= n) x = 2 * (n - 1) - x;  // pads < n: one reflection suffices
    } else {
      x = std::min(std::max<int64_t>(x, 0), n - 1);
    }
    idx[j] = x;
  }
  return idx;
}

// The tables both directions use.
struct MirrorPlan {
  MirrorArgs a;
  std::vector<int64_t> ih, iw;  // input row / column of each output row / column
  int64_t j0 = 0, j1 = 0;       // output columns [j0, j1) copy input columns j - left
  // Output rows feeding each input row, ascending: rows_at[row_start[h] ..
  // row_start[h + 1]).
  std::vector<int64_t> row_start, rows_at;

  MirrorPlan(const MirrorArgs& args, bool reflect) : a(args) {
    ih = mirror_index(a.H, a.top, a.OH, reflect);
    iw = mirror_index(a.W, a.left, a.OW, reflect);
    j0 = std::min(std::max<int64_t>(a.left, 0), a.OW);
    j1 = std::max(j0, std::min(a.OW, a.W + a.left));
    row_start.assign(a.H + 1, 0);
    for (int64_t h : ih) ++row_start[h + 1];
    for (int64_t h = 0; h < a.H; ++h) row_start[h + 1] += row_start[h];
    rows_at.resize(a.OH);
    std::vector<int64_t> fill(row_start.begin(), row_start.end() - 1);
    for (int64_t i = 0; i < a.OH; ++i) rows_at[fill[ih[i]]++] = i;
  }
};

struct MirrorPadKernel : Kernel {
  MirrorPlan p;
  explicit MirrorPadKernel(MirrorPlan plan) : p(std::move(plan)) {}
  template <class T>
  void go(const T* x, T* o) const {
    const MirrorArgs& a = p.a;
    const int64_t rows = a.planes * a.OH;
    const int64_t* ih = p.ih.data();
    const int64_t* iw = p.iw.data();
    parallel_for(rows, rows * a.OW > kParallelMin && rows > 1, [&](int64_t q) {
      const int64_t plane = q / a.OH, i = q % a.OH;
      const T* src = x + (plane * a.H + ih[i]) * a.W;
      T* dst = o + q * a.OW;
      for (int64_t j = 0; j < p.j0; ++j) dst[j] = src[iw[j]];
      if (p.j1 > p.j0) std::memcpy(dst + p.j0, src + (p.j0 - a.left), sizeof(T) * (p.j1 - p.j0));
      for (int64_t j = p.j1; j < a.OW; ++j) dst[j] = src[iw[j]];
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) go(in[0].as<const double>(), out[0].as<double>());
    else go(in[0].as<const float>(), out[0].as<float>());
  }
};

struct MirrorBackwardKernel : Kernel {
  MirrorPlan p;
  explicit MirrorBackwardKernel(MirrorPlan plan) : p(std::move(plan)) {}
  template <class T>
  void go(const T* g, T* gi) const {
    const MirrorArgs& a = p.a;
    const int64_t rows = a.planes * a.H;
    const int64_t* iw = p.iw.data();
    parallel_for(rows, a.planes * a.OH * a.OW > kParallelMin && rows > 1, [&](int64_t q) {
      const int64_t plane = q / a.H, h = q % a.H;
      T* dst = gi + q * a.W;
      std::fill(dst, dst + a.W, T(0));
      for (int64_t k = p.row_start[h]; k < p.row_start[h + 1]; ++k) {
        const T* src = g + (plane * a.OH + p.rows_at[k]) * a.OW;
        for (int64_t j = 0; j < a.OW; ++j) dst[iw[j]] += src[j];
      }
    });
  }
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (in[0].dtype == DType::F64) go(in[0].as<const double>(), out[0].as<double>());
    else go(in[0].as<const float>(), out[0].as<float>());
  }
};

template <int DIMS, bool REFLECT>
std::vector<TensorType> mirror_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(1);
  return {{ctx.input(0).dtype, mirror_args(ctx, ctx.input(0), DIMS, REFLECT).out}};
}

template <int DIMS, bool REFLECT>
std::unique_ptr<Kernel> mirror_make(const KernelCtx& kc) {
  return std::make_unique<MirrorPadKernel>(
      MirrorPlan(mirror_args(kc.node, kc.node.input(0), DIMS, REFLECT), REFLECT));
}

// (grad_output, self): grad_input has self's type.
template <int DIMS, bool REFLECT>
std::vector<TensorType> mirror_backward_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  const TensorType& g = ctx.input(0);
  const TensorType& self = ctx.input(1);
  MirrorArgs a = mirror_args(ctx, self, DIMS, REFLECT);
  const TensorType want{self.dtype, a.out};
  if (g != want) ctx.fail("grad_output is " + g.str() + ", the padded output is " + want.str());
  return {self};
}

template <int DIMS, bool REFLECT>
std::unique_ptr<Kernel> mirror_backward_make(const KernelCtx& kc) {
  return std::make_unique<MirrorBackwardKernel>(
      MirrorPlan(mirror_args(kc.node, kc.node.input(1), DIMS, REFLECT), REFLECT));
}

}  // namespace

void register_pad_ops(OpRegistry& r) {
  r.add(OpDef{"aten.constant_pad_nd.default",
              "self framed by attr value (cast to self's dtype; integer overflow refused): attr pad "
              "[last-dim before, after, prev-dim before, ...], negative pads crop; any dtype",
              &const_pad_infer, &const_pad_make, false, nullptr, false, -1, true});
  const char* batch1 = "; self 2-d or 3-d (batched), attr padding [left, right]; float32/float64";
  const char* batch2 = "; self 3-d or 4-d (batched), attr padding [left, right, top, bottom]; float32/float64";
  r.add(OpDef{"aten.reflection_pad1d.default",
              std::string("self's last dim padded by its mirror image (pads < the size; negative pads crop)") + batch1,
              &mirror_infer<1, true>, &mirror_make<1, true>, false, nullptr, false, -1, true});
  r.add(OpDef{"aten.reflection_pad2d.default",
              std::string("self's last two dims padded by their mirror image (pads < the sizes; negative pads crop)") + batch2,
              &mirror_infer<2, true>, &mirror_make<2, true>, false, nullptr, false, -1, true});
  r.add(OpDef{"aten.replication_pad1d.default",
              std::string("self's last dim padded by copies of its edge values (negative pads crop)") + batch1,
              &mirror_infer<1, false>, &mirror_make<1, false>, false, nullptr, false, -1, true});
  r.add(OpDef{"aten.replication_pad2d.default",
              std::string("self's last two dims padded by copies of their edge values (negative pads crop)") + batch2,
              &mirror_infer<2, false>, &mirror_make<2, false>, false, nullptr, false, -1, true});
  const char* back = " (grad_output, self): grad_output summed back onto self's positions, per input row in output order";
  r.add(OpDef{"aten.reflection_pad1d_backward.default", std::string("reflection_pad1d's gradient") + back + batch1,
              &mirror_backward_infer<1, true>, &mirror_backward_make<1, true>});
  r.add(OpDef{"aten.reflection_pad2d_backward.default", std::string("reflection_pad2d's gradient") + back + batch2,
              &mirror_backward_infer<2, true>, &mirror_backward_make<2, true>});
  r.add(OpDef{"aten.replication_pad1d_backward.default", std::string("replication_pad1d's gradient") + back + batch1,
              &mirror_backward_infer<1, false>, &mirror_backward_make<1, false>});
  r.add(OpDef{"aten.replication_pad2d_backward.default", std::string("replication_pad2d's gradient") + back + batch2,
              &mirror_backward_infer<2, false>, &mirror_backward_make<2, false>});
}

}  // namespace ts

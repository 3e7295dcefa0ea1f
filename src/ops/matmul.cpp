// mm, bmm and addmm on oneDNN's matmul primitive with plain row-major layouts.
// addmm copies the broadcast `self` into the output, then runs the matmul with
// output scale alpha and a sum post-op with scale beta. trainstep.matmul
// (made by the fold_transpose pass) reads either operand transposed through
// a strided (column-major) memory descriptor, so no transpose is copied.
#include <algorithm>
#include <cstring>
#include <utility>
#include <string>

#include "ops/dnnl_util.h"
#include "ops/op.h"

namespace ts {
namespace {

using dnnl::memory;

void expect_f32_rank(const NodeCtx& ctx, int i, size_t rank, const char* name) {
  const TensorType& t = ctx.input(i);
  if (t.dtype != DType::F32) ctx.fail(std::string(name) + " must be float32, got " + t.str());
  if (t.shape.size() != rank)
    ctx.fail(std::string(name) + " must be rank " + std::to_string(rank) + ", got " + t.str());
}

// Checks a@b shapes (rank 2 or batched rank 3) and returns the result shape.
Shape mm_shape(const NodeCtx& ctx, int ia, int ib, size_t rank, const char* na, const char* nb) {
  expect_f32_rank(ctx, ia, rank, na);
  expect_f32_rank(ctx, ib, rank, nb);
  const Shape& a = ctx.input(ia).shape;
  const Shape& b = ctx.input(ib).shape;
  if (rank == 3 && a[0] != b[0])
    ctx.fail("batch sizes differ: " + shape_str(a) + " and " + shape_str(b));
  if (a[rank - 1] != b[rank - 2])
    ctx.fail("inner dimensions differ: " + shape_str(a) + " @ " + shape_str(b));
  Shape r = a;
  r[rank - 1] = b[rank - 1];
  return r;
}

class MatmulKernel : public Kernel {
 public:
  // Inputs a, b at positions ia, ib. For addmm, `bias` is self's shape
  // (broadcast to the output) and alpha/beta are set.
  // a and b are the logical (M,K) and (K,N) shapes; ta/tb: that operand is
  // stored transposed, (K,M) or (N,K) row-major (rank 2 only).
  MatmulKernel(const Shape& a, const Shape& b, const Shape& c, int ia, int ib, const Shape* bias,
               float alpha, float beta, bool ta = false, bool tb = false)
      : ia_(ia), ib_(ib), beta_(bias ? beta : 0.f) {
    rows_ = c[0];
    cols_ = c[1];
    if (bias) bias_shape_ = *bias;
    if (shape_numel(a) == 0 || shape_numel(b) == 0) {
      // An empty operand (oneDNN divides by these sizes): with K == 0 the
      // product is zeros, so the result is beta * self or zeros.
      empty_ = true;
      return;
    }
    using tag = memory::format_tag;
    auto tg = a.size() == 3 ? tag::abc : tag::ab;
    auto md = [&](const Shape& s, bool t = false) {
      return memory::desc(to_dims(s), memory::data_type::f32, t ? tag::ba : tg);
    };
    dnnl::primitive_attr attr = user_scratchpad_attr();
    if (alpha != 1.f) attr.set_output_scales(0, {alpha});
    if (beta_ != 0.f) {
      dnnl::post_ops po;
      po.append_sum(beta_);
      attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md(a, ta), md(b, tb), md(c)), attr,
                                    cpu_engine());
    a_ = plain_memory(md(a, ta));
    b_ = plain_memory(md(b, tb));
    c_ = plain_memory(md(c));
    step_.prim = dnnl::matmul(pd);
    step_.bind(DNNL_ARG_SRC, a_);
    step_.bind(DNNL_ARG_WEIGHTS, b_);
    step_.bind(DNNL_ARG_DST, c_);
    bind_scratchpad(step_, pd.scratchpad_desc());
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (empty_) {
      float* c = out[0].as<float>();
      const int64_t n = out[0].numel();
      if (beta_ == 0.f) {
        std::fill(c, c + n, 0.f);
        return;
      }
      fill_bias(in[0].as<float>(), c);
      for (int64_t i = 0; i < n; ++i) c[i] *= beta_;
      return;
    }
    if (beta_ != 0.f) fill_bias(in[0].as<float>(), out[0].as<float>());
    a_.set_data_handle(in[ia_].data);
    b_.set_data_handle(in[ib_].data);
    c_.set_data_handle(out[0].data);
    step_.exec();
  }

 private:
  // Writes self broadcast to (rows, cols); self is rank <= 2 with dims 1 or equal.
  void fill_bias(const float* s, float* c) const {
    size_t r = bias_shape_.size();
    bool per_row = r == 2 && bias_shape_[0] != 1;
    bool per_col = r >= 1 && bias_shape_[r - 1] != 1;
    for (int64_t i = 0; i < rows_; ++i) {
      const float* src = s + (per_row ? i * (per_col ? cols_ : 1) : 0);
      float* dst = c + i * cols_;
      if (per_col)
        std::memcpy(dst, src, sizeof(float) * cols_);
      else
        for (int64_t j = 0; j < cols_; ++j) dst[j] = src[0];
    }
  }

  int ia_, ib_;
  float beta_;
  bool empty_ = false;  // an operand has no elements: no primitive
  Shape bias_shape_;
  int64_t rows_ = 0, cols_ = 0;
  memory a_, b_, c_;
  DnnlStep step_;
};

// Turns oneDNN's construction errors into errors that name the node.
template <class F>
std::unique_ptr<Kernel> build(const NodeCtx& ctx, F f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    ctx.fail(std::string("oneDNN could not build the matmul: ") + e.what());
  }
}

std::vector<TensorType> infer_mm(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  return {{DType::F32, mm_shape(ctx, 0, 1, 2, "self", "mat2")}};
}

std::unique_ptr<Kernel> make_mm(const KernelCtx& k) {
  return build(k.node, [&] {
    return std::make_unique<MatmulKernel>(k.node.input(0).shape, k.node.input(1).shape,
                                          k.outputs[0].shape, 0, 1, nullptr, 1.f, 0.f);
  });
}

std::vector<TensorType> infer_bmm(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  return {{DType::F32, mm_shape(ctx, 0, 1, 3, "self", "mat2")}};
}

std::vector<TensorType> infer_addmm(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  Shape c = mm_shape(ctx, 1, 2, 2, "mat1", "mat2");
  const TensorType& s = ctx.input(0);
  if (s.dtype != DType::F32) ctx.fail("self must be float32, got " + s.str());
  bool ok = s.shape.size() <= 2;
  for (size_t i = 0; ok && i < s.shape.size(); ++i) {
    int64_t d = s.shape[s.shape.size() - 1 - i];
    ok = d == 1 || d == c[1 - i];
  }
  if (!ok) ctx.fail("self " + s.str() + " is not broadcastable to " + shape_str(c));
  ctx.attr_float("beta");
  ctx.attr_float("alpha");
  return {{DType::F32, c}};
}

std::unique_ptr<Kernel> make_addmm(const KernelCtx& k) {
  const NodeCtx& n = k.node;
  return build(n, [&] {
    return std::make_unique<MatmulKernel>(n.input(1).shape, n.input(2).shape, k.outputs[0].shape,
                                          1, 2, &n.input(0).shape, float(n.attr_float("alpha")),
                                          float(n.attr_float("beta")));
  });
}

// trainstep.matmul: op(a) @ op(b), op = transpose when trans_a / trans_b.
struct TransShapes {
  bool ta, tb;
  Shape a, b, c;  // logical op(a), op(b) and the result
};

TransShapes trans_shapes(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  expect_f32_rank(ctx, 0, 2, "a");
  expect_f32_rank(ctx, 1, 2, "b");
  TransShapes t;
  t.ta = ctx.attr_bool("trans_a");
  t.tb = ctx.attr_bool("trans_b");
  t.a = ctx.input(0).shape;
  t.b = ctx.input(1).shape;
  if (t.ta) std::swap(t.a[0], t.a[1]);
  if (t.tb) std::swap(t.b[0], t.b[1]);
  if (t.a[1] != t.b[0])
    ctx.fail("inner dimensions differ: " + std::string(t.ta ? "a^T " : "a ") + shape_str(t.a) +
             " @ " + (t.tb ? "b^T " : "b ") + shape_str(t.b));
  t.c = {t.a[0], t.b[1]};
  return t;
}

std::vector<TensorType> infer_trans_mm(const NodeCtx& ctx) {
  return {{DType::F32, trans_shapes(ctx).c}};
}

std::unique_ptr<Kernel> make_trans_mm(const KernelCtx& k) {
  TransShapes t = trans_shapes(k.node);
  return build(k.node, [&] {
    return std::make_unique<MatmulKernel>(t.a, t.b, t.c, 0, 1, nullptr, 1.f, 0.f, t.ta, t.tb);
  });
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add({"aten.mm.default", "Matrix product (oneDNN) of float32 (M,K) @ (K,N) -> (M,N)", infer_mm,
         make_mm});
  r.add({"aten.bmm.default",
         "Batched matrix product (oneDNN) of float32 (B,M,K) @ (B,K,N) -> (B,M,N)", infer_bmm,
         make_mm});
  r.add({"aten.addmm.default",
         "beta*self + alpha*(mat1 @ mat2) (oneDNN), float32; self broadcastable to (M,N); "
         "self is ignored when beta=0",
         infer_addmm, make_addmm});
  r.add({"trainstep.matmul",
         "op(a) @ op(b) (oneDNN) for float32 rank-2 a, b, op = transpose when attr trans_a / "
         "trans_b; reads transposed operands in place (made by the fold_transpose pass)",
         infer_trans_mm, make_trans_mm});
}

}  // namespace ts

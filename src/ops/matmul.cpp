// mm, bmm and addmm. float32 runs on oneDNN's matmul primitive with plain
// row-major layouts: addmm copies the broadcast `self` into the output, then
// runs the matmul with output scale alpha and a sum post-op with scale beta.
// trainstep.matmul and trainstep.addmm (made by the fold_transpose pass) read either operand
// transposed through a strided (column-major) memory descriptor, so no
// transpose is copied. float64 (oneDNN has no f64 matmul on the CPU) runs on
// Gemm64 (gemm64.h), which reads transposed operands in place too. Both
// operands (and addmm's self) must have the same dtype, as in torch.
// A rank-2 float32 product also has OpenBLAS (openblas.h, where the
// library is there) and, with a small inner dimension, SmallGemm
// (gemm_small.h); which runs is measured when the kernel is built
// (kernel_choice.h), per shape, and cached.
// bfloat16 runs on oneDNN's bf16 matmul only (AMX or AVX512_BF16 where the
// CPU has them): bf16 operands, float32 accumulation, the result (addmm's
// beta*self + alpha*product included) rounded once to bf16, as torch's CPU
// kernels do. Its kernel reports the oneDNN implementation as its choice.
#include <algorithm>
#include <cstring>
#include <utility>
#include <string>

#include "ops/bf16_kernel.h"
#include "ops/dnnl_util.h"
#include "ops/gemm64.h"
#include "ops/gemm_small.h"
#include "ops/kernel_choice.h"
#include "ops/op.h"
#include "ops/openblas.h"
#include "ops/matmul.h"
#include "trainstep/bfloat16.h"

namespace ts {
namespace {

using dnnl::memory;

void expect_float_rank(const NodeCtx& ctx, int i, size_t rank, const char* name) {
  const TensorType& t = ctx.input(i);
  if (!dtype_is_float(t.dtype))
    ctx.fail(std::string(name) + " must be float32, float64 or bfloat16, got " + t.str());
  if (t.shape.size() != rank)
    ctx.fail(std::string(name) + " must be rank " + std::to_string(rank) + ", got " + t.str());
}

// Input j must have input i's dtype (torch does not promote in matmul).
void expect_same_dtype(const NodeCtx& ctx, int i, int j, const char* ni, const char* nj) {
  const TensorType& a = ctx.input(i);
  const TensorType& b = ctx.input(j);
  if (a.dtype != b.dtype)
    ctx.fail(std::string(ni) + " and " + nj + " must have the same dtype, got " + a.str() +
             " and " + b.str());
}

// Checks a@b shapes (rank 2 or batched rank 3) and returns the result shape.
Shape mm_shape(const NodeCtx& ctx, int ia, int ib, size_t rank, const char* na, const char* nb) {
  expect_float_rank(ctx, ia, rank, na);
  expect_float_rank(ctx, ib, rank, nb);
  expect_same_dtype(ctx, ia, ib, na, nb);
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

// Writes self (shape s) broadcast to (rows, cols); self is rank <= 2 with
// dims 1 or equal.
template <class T>
void fill_bias(const Shape& bias_shape, const T* s, T* c, int64_t rows, int64_t cols) {
  size_t r = bias_shape.size();
  bool per_row = r == 2 && bias_shape[0] != 1;
  bool per_col = r >= 1 && bias_shape[r - 1] != 1;
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = s + (per_row ? i * (per_col ? cols : 1) : 0);
    T* dst = c + i * cols;
    if (per_col)
      std::memcpy(dst, src, sizeof(T) * cols);
    else
      for (int64_t j = 0; j < cols; ++j) dst[j] = src[0];
  }
}

class MatmulKernel : public Kernel {
 public:
  // Inputs a, b at positions ia, ib. For addmm, `bias` is self's shape
  // (broadcast to the output) and alpha/beta are set.
  // a and b are the logical (B?,M,K) and (B?,K,N) shapes; ta/tb: that
  // operand is stored with its last two dims swapped, (B?,K,M) or (B?,N,K).
  // dt: the operands' and result's type (f32 or bf16).
  MatmulKernel(const Shape& a, const Shape& b, const Shape& c, int ia, int ib, const Shape* bias,
               float alpha, float beta, bool ta = false, bool tb = false,
               memory::data_type dt = memory::data_type::f32)
      : ia_(ia), ib_(ib), beta_(bias ? beta : 0.f), bf16_(dt == memory::data_type::bf16) {
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
      // A transposed operand is stored with its last two dims swapped.
      const auto tt = a.size() == 3 ? tag::acb : tag::ba;
      return memory::desc(to_dims(s), dt, t ? tt : tg);
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
    impl_ = pd.impl_info_str();
  }

  // The oneDNN implementation that runs ("brg:avx512_core_amx_bf16"); empty
  // when an operand is empty.
  const std::string& impl() const { return impl_; }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    if (empty_) {
      if (bf16_)
        run_empty<uint16_t>(in, out);
      else
        run_empty<float>(in, out);
      return;
    }
    // The sum post-op adds beta * (self broadcast) in float32 before the
    // one rounding: the bias is copied in bytes (bf16 is exact).
    if (beta_ != 0.f) {
      if (bf16_)
        fill_bias(bias_shape_, in[0].as<uint16_t>(), out[0].as<uint16_t>(), rows_, cols_);
      else
        fill_bias(bias_shape_, in[0].as<float>(), out[0].as<float>(), rows_, cols_);
    }
    a_.set_data_handle(in[ia_].data);
    b_.set_data_handle(in[ib_].data);
    c_.set_data_handle(out[0].data);
    step_.exec();
  }

 private:
  // K == 0: the product is zeros, so the result is beta * self or zeros.
  template <class T>
  void run_empty(const Tensor* in, Tensor* out) const {
    T* c = out[0].as<T>();
    const int64_t n = out[0].numel();
    if (beta_ == 0.f) {
      std::fill(c, c + n, T(0));  // +0 in both types
      return;
    }
    fill_bias(bias_shape_, in[0].as<T>(), c, rows_, cols_);
    for (int64_t i = 0; i < n; ++i) c[i] = scaled(c[i]);
  }
  float scaled(float v) const { return v * beta_; }
  uint16_t scaled(uint16_t v) const { return float_to_bf16(bf16_to_float(v) * beta_); }

  int ia_, ib_;
  float beta_;
  bool bf16_;
  std::string impl_;
  bool empty_ = false;  // an operand has no elements: no primitive
  Shape bias_shape_;
  int64_t rows_ = 0, cols_ = 0;
  memory a_, b_, c_;
  DnnlStep step_;
};

// The product on one of our row-major GEMM engines (Gemm64 for float64,
// SmallGemm and OpenBlasGemm for float32), which take alpha and beta: addmm's
// self is written to the output first. Same conventions as MatmulKernel.
template <class T, class Gemm>
class EngineKernel : public Kernel {
 public:
  template <class... Args>
  EngineKernel(const Shape& c, int ia, int ib, const Shape* bias, double alpha, double beta,
               Args&&... gemm_args)
      : ia_(ia), ib_(ib), alpha_(T(alpha)), beta_(bias ? T(beta) : T(0)),
        rows_(c[c.size() - 2]), cols_(c[c.size() - 1]), gemm_(std::forward<Args>(gemm_args)...) {
    if (bias) bias_shape_ = *bias;
  }

  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    T* c = out[0].as<T>();
    if (beta_ != T(0)) fill_bias(bias_shape_, in[0].as<T>(), c, rows_, cols_);
    gemm_.run(in[ia_].as<T>(), in[ib_].as<T>(), c, alpha_, beta_);
  }

 private:
  int ia_, ib_;
  T alpha_, beta_;
  int64_t rows_, cols_;
  Shape bias_shape_;
  Gemm gemm_;
};

// bfloat16: oneDNN's matmul, the one implementation, reported as the
// kernel's choice so bench --profile shows which ISA it runs on.
std::unique_ptr<Kernel> make_bf16(const Shape& a, const Shape& b, const Shape& c, int ia, int ib,
                                  const Shape* bias, double alpha, double beta, bool ta, bool tb) {
  auto kern = std::make_unique<MatmulKernel>(a, b, c, ia, ib, bias, float(alpha), float(beta), ta,
                                             tb, memory::data_type::bf16);
  const size_t r = c.size();
  std::string key = "gemm bf16 " + (r == 3 ? "b=" + std::to_string(c[0]) + " " : std::string()) +
                    "m=" + std::to_string(c[r - 2]) + " n=" + std::to_string(c[r - 1]) +
                    " k=" + std::to_string(a[r - 1]) + (ta ? " a^T" : "") + (tb ? " b^T" : "");
  if (bias && beta != 0) key += " +beta*C";
  if (alpha != 1) key += " *alpha";
  KernelChoice choice = only_choice(key, "onednn " + (kern->impl().empty() ? "none (empty)" : kern->impl()));
  return std::make_unique<ChosenKernel>(std::move(kern), std::move(choice));
}

// The kernel for the node's dtype (input ia's; verify checked both agree).
// A float32 rank-2 product has several: oneDNN, SmallGemm where K (or M) is
// small, OpenBLAS where the library is there and the step runs one thread
// (threaded, it allocates on every call: tests/python/test_no_alloc.py);
// whichever measures fastest here runs it.
std::unique_ptr<Kernel> make_kernel(const KernelCtx& k, const Shape& a, const Shape& b,
                                    const Shape& c, int ia, int ib, const Shape* bias,
                                    double alpha, double beta, bool ta = false, bool tb = false) {
  if (k.node.input(ia).dtype == DType::BF16) {
    // No bfloat16 products in oneDNN on this CPU: the float32 twin.
    if (!dnnl_bf16_available()) return make_via_float32(*OpRegistry::get().find(k.node.op()), k);
    return make_bf16(a, b, c, ia, ib, bias, alpha, beta, ta, tb);
  }
  if (k.node.input(ia).dtype == DType::F64)
    return std::make_unique<EngineKernel<double, Gemm64>>(
        c, ia, ib, bias, alpha, beta, c.size() == 3 ? c[0] : 1, a[a.size() - 2], c[c.size() - 1],
        a[a.size() - 1], ta, tb, k.threads);
  std::vector<LazyCandidate> cands;
  cands.push_back({"onednn", [&]() -> std::unique_ptr<Kernel> {
                     return std::make_unique<MatmulKernel>(a, b, c, ia, ib, bias, float(alpha),
                                                           float(beta), ta, tb);
                   }});
  if (c.size() == 2 && SmallGemm::suits(c[0], c[1], a[1]))
    cands.push_back({"small_k", [&]() -> std::unique_ptr<Kernel> {
                       return std::make_unique<EngineKernel<float, SmallGemm>>(
                           c, ia, ib, bias, alpha, beta, c[0], c[1], a[1], ta, tb, k.threads);
                     }});
  if (c.size() == 2 && k.threads == 1 && OpenBlasGemm::suits(c[0], c[1], a[1]))
    cands.push_back({"openblas", [&]() -> std::unique_ptr<Kernel> {
                       return std::make_unique<EngineKernel<float, OpenBlasGemm>>(
                           c, ia, ib, bias, alpha, beta, c[0], c[1], a[1], ta, tb);
                     }});
  if (cands.size() == 1) return cands[0].make();
  std::string key = "gemm m=" + std::to_string(c[0]) + " n=" + std::to_string(c[1]) +
                    " k=" + std::to_string(a[1]) + (ta ? " a^T" : "") + (tb ? " b^T" : "");
  if (bias && beta != 0) key += " +beta*C";
  if (alpha != 1) key += " *alpha";
  LazyChoice r = choose_kernel_lazily(key, k, {{DType::F32, c}}, cands);
  std::unique_ptr<Kernel> kern = r.built ? std::move(r.built) : cands[r.choice.pick].make();
  return std::make_unique<ChosenKernel>(std::move(kern), std::move(r.choice));
}

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
  return {{ctx.input(0).dtype, mm_shape(ctx, 0, 1, 2, "self", "mat2")}};
}

std::unique_ptr<Kernel> make_mm(const KernelCtx& k) {
  return build(k.node, [&] {
    return make_kernel(k, k.node.input(0).shape, k.node.input(1).shape, k.outputs[0].shape, 0, 1,
                       nullptr, 1.0, 0.0);
  });
}

std::vector<TensorType> infer_bmm(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  return {{ctx.input(0).dtype, mm_shape(ctx, 0, 1, 3, "self", "mat2")}};
}

// self broadcastable to the product's (M, N) shape c, as addmm takes it.
void expect_addmm_self(const NodeCtx& ctx, const Shape& c) {
  const TensorType& s = ctx.input(0);
  bool ok = s.shape.size() <= 2;
  for (size_t i = 0; ok && i < s.shape.size(); ++i) {
    int64_t d = s.shape[s.shape.size() - 1 - i];
    ok = d == 1 || d == c[1 - i];
  }
  if (!ok) ctx.fail("self " + s.str() + " is not broadcastable to " + shape_str(c));
  ctx.attr_float("beta");
  ctx.attr_float("alpha");
}

std::vector<TensorType> infer_addmm(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  Shape c = mm_shape(ctx, 1, 2, 2, "mat1", "mat2");
  expect_same_dtype(ctx, 1, 0, "mat1", "self");
  expect_addmm_self(ctx, c);
  return {{ctx.input(0).dtype, c}};
}

std::unique_ptr<Kernel> make_addmm(const KernelCtx& k) {
  const NodeCtx& n = k.node;
  return build(n, [&] {
    return make_kernel(k, n.input(1).shape, n.input(2).shape, k.outputs[0].shape, 1, 2,
                       &n.input(0).shape, n.attr_float("alpha"), n.attr_float("beta"));
  });
}

// trainstep.matmul: op(a) @ op(b), op = transpose (of the last two dims)
// when trans_a / trans_b; a and b both rank 2, or both rank 3 (batched).
struct TransShapes {
  bool ta, tb;
  Shape a, b, c;  // logical op(a), op(b) and the result
};

// a and b are inputs ia and ia + 1.
TransShapes trans_shapes(const NodeCtx& ctx, int ia = 0) {
  const int ib = ia + 1;
  const size_t rank = ctx.input(ia).shape.size();
  if ((rank != 2 && rank != 3) || ctx.input(ib).shape.size() != rank)
    ctx.fail("a and b must both be rank 2 or both rank 3, got " + ctx.input(ia).str() + " and " +
             ctx.input(ib).str());
  expect_float_rank(ctx, ia, rank, "a");
  expect_float_rank(ctx, ib, rank, "b");
  expect_same_dtype(ctx, ia, ib, "a", "b");
  TransShapes t;
  t.ta = ctx.attr_bool("trans_a");
  t.tb = ctx.attr_bool("trans_b");
  t.a = ctx.input(ia).shape;
  t.b = ctx.input(ib).shape;
  if (t.ta) std::swap(t.a[rank - 2], t.a[rank - 1]);
  if (t.tb) std::swap(t.b[rank - 2], t.b[rank - 1]);
  if (rank == 3 && t.a[0] != t.b[0])
    ctx.fail("batch sizes differ: " + shape_str(ctx.input(ia).shape) + " and " +
             shape_str(ctx.input(ib).shape));
  if (t.a[rank - 1] != t.b[rank - 2])
    ctx.fail("inner dimensions differ: " + std::string(t.ta ? "a^T " : "a ") + shape_str(t.a) +
             " @ " + (t.tb ? "b^T " : "b ") + shape_str(t.b));
  t.c = t.a;
  t.c[rank - 1] = t.b[rank - 1];
  return t;
}

std::vector<TensorType> infer_trans_mm(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  return {{ctx.input(0).dtype, trans_shapes(ctx).c}};
}

std::unique_ptr<Kernel> make_trans_mm(const KernelCtx& k) {
  TransShapes t = trans_shapes(k.node);
  return build(k.node, [&] {
    return make_kernel(k, t.a, t.b, t.c, 0, 1, nullptr, 1.0, 0.0, t.ta, t.tb);
  });
}

// trainstep.addmm: addmm with op(mat1), op(mat2) as trainstep.matmul's.
TransShapes addmm_t_shapes(const NodeCtx& ctx) {
  ctx.expect_inputs(3);
  if (ctx.input(1).shape.size() != 2 || ctx.input(2).shape.size() != 2)
    ctx.fail("mat1 and mat2 must be rank 2, got " + ctx.input(1).str() + " and " + ctx.input(2).str());
  TransShapes t = trans_shapes(ctx, 1);
  expect_same_dtype(ctx, 1, 0, "mat1", "self");
  expect_addmm_self(ctx, t.c);
  return t;
}

std::vector<TensorType> infer_addmm_t(const NodeCtx& ctx) {
  return {{ctx.input(0).dtype, addmm_t_shapes(ctx).c}};
}

std::unique_ptr<Kernel> make_addmm_t(const KernelCtx& k) {
  const NodeCtx& n = k.node;
  TransShapes t = addmm_t_shapes(n);
  return build(n, [&] {
    return make_kernel(k, t.a, t.b, t.c, 1, 2, &n.input(0).shape, n.attr_float("alpha"),
                       n.attr_float("beta"), t.ta, t.tb);
  });
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  OpDef mm{opname::mm,
           "Matrix product of float32 (oneDNN, or SmallGemm where it measures faster), bfloat16 "
           "(oneDNN) or float64 (M,K) @ (K,N) -> (M,N)", infer_mm,
           make_mm};
  mm.fuse_role = FuseRole::MatMul;
  mm.bf16 = Bf16::Native;
  r.add(std::move(mm));
  OpDef bmm{opname::bmm,
            "Batched matrix product of float32 or bfloat16 (oneDNN) or float64 (B,M,K) @ (B,K,N) "
            "-> (B,M,N)",
            infer_bmm, make_mm};
  bmm.fuse_role = FuseRole::BatchMatMul;
  bmm.bf16 = Bf16::Native;
  r.add(std::move(bmm));
  OpDef addmm{opname::addmm,
              "beta*self + alpha*(mat1 @ mat2), float32 (oneDNN), bfloat16 (oneDNN) or float64; "
              "self broadcastable to (M,N); self is ignored when beta=0",
              infer_addmm, make_addmm};
  addmm.bf16 = Bf16::Native;
  addmm.fuse_role = FuseRole::AddMm;
  r.add(std::move(addmm));
  OpDef addmm_t{opname::addmm_t,
                "beta*self + alpha*(op(mat1) @ op(mat2)), addmm with op = transpose when attr "
                "trans_a / trans_b; reads transposed operands in place (made by the "
                "fold_transpose pass from addmm(self, x, t(w)), as nn.Linear exports)",
                infer_addmm_t, make_addmm_t};
  addmm_t.bf16 = Bf16::Native;
  addmm_t.fuse_role = FuseRole::AddMmT;
  r.add(std::move(addmm_t));
  OpDef matmul{"trainstep.matmul",
               "op(a) @ op(b) for float32 (oneDNN, or SmallGemm where it measures faster), bfloat16 "
               "(oneDNN) or float64 "
               "a, b both rank 2 or both rank 3 (batched), op = transpose of the last two dims when "
               "attr trans_a / trans_b; reads transposed operands in place (made by the "
               "fold_transpose and merge_summed_products passes)",
               infer_trans_mm, make_trans_mm};
  matmul.fuse_role = FuseRole::MatMulT;
  matmul.bf16 = Bf16::Native;
  r.add(std::move(matmul));
}

}  // namespace ts

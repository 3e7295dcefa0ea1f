// mm, bmm, addmm, trainstep.matmul and trainstep.addmm on cuBLASLt. Our tensors are
// row-major and cuBLASLt is column-major: a row-major (r, c) matrix has the
// bytes of the column-major (c, r) one, its transpose. So C = op(a) op(b) is
// computed as C^T = op(b)^T op(a)^T, with b's buffer as cuBLASLt's A and a's
// as its B; a transposed operand (trainstep.matmul) just flips cuBLASLt's
// op. float32 computes in float32 (CUBLAS_COMPUTE_32F: no TF32), float64 in
// float64. Layouts, descriptor and algorithm are planned at build time.
//
// addmm's self: a full (M, N) self is cuBLASLt's C (with beta); a broadcast
// one is first written to the output by cudnnAddTensor (beta * self), then
// the product is added in place (C = D = output, beta 1).
#include <cstdint>
#include <limits>
#include <string>

#include "cuda/kernel.h"
#include "ops/matmul.h"

namespace ts::cuda {
namespace {

constexpr uint64_t kMaxWorkspace = uint64_t(32) << 20;

// batch x op(a) (m, k) @ op(b) (k, n). ta: a is stored (k, m); tb: b is
// stored (n, k).
struct Dims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
};

void lt_check(const NodeCtx& node, cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    node.fail(std::string("CUDA: cuBLASLt ") + what + ": " + cublasLtGetStatusName(s));
}

void dnn_check(const NodeCtx& node, cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS)
    node.fail(std::string("CUDA: cuDNN ") + what + ": " + cudnnGetErrorString(s));
}

struct Algo {
  cublasLtMatmulAlgo_t algo{};
  size_t ws = 0;
  bool ok = false;
};

// One planned cuBLASLt product, sizes all positive.
class LtPlan {
 public:
  LtPlan(const Build& b, DType dt, const Dims& d) {
    const NodeCtx& node = b.node();
    if (d.batch > std::numeric_limits<int32_t>::max())
      node.fail("CUDA: batch " + std::to_string(d.batch) + " too large for cuBLASLt");
    elem_ = dtype_size(dt);
    const cudaDataType_t t = dt == DType::F64 ? CUDA_R_64F : CUDA_R_32F;
    const cublasComputeType_t ct = dt == DType::F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    lt_check(node, cublasLtMatmulDescCreate(&desc_, ct, t), "matmul descriptor");
    const int32_t opa = d.tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our b
    const int32_t opb = d.ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our a
    lt_check(node,
             cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
             "transa");
    lt_check(node,
             cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
             "transb");
    // Stored matrices in column-major terms: b row-major (k, n) is
    // column-major (n, k); stored as (n, k) it is column-major (k, n).
    a_ = layout(node, t, d.tb ? d.k : d.n, d.tb ? d.n : d.k, d.batch, d.k * d.n);
    b_ = layout(node, t, d.ta ? d.m : d.k, d.ta ? d.k : d.m, d.batch, d.m * d.k);
    c_ = layout(node, t, d.n, d.m, d.batch, d.m * d.n);
    // An algorithm for 16-byte aligned buffers (the usual case), and one for
    // any element-aligned buffers (a view at an odd offset).
    fast_ = pick(b, 16);
    safe_ = pick(b, static_cast<uint32_t>(elem_));
    if (!fast_.ok && !safe_.ok)
      node.fail("CUDA: cuBLASLt has no algorithm for this matmul (" + std::to_string(d.batch) +
                " x " + std::to_string(d.m) + "x" + std::to_string(d.k) + " @ " +
                std::to_string(d.k) + "x" + std::to_string(d.n) + ")");
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }

  size_t workspace() const {
    size_t w = fast_.ok ? fast_.ws : 0;
    if (safe_.ok && safe_.ws > w) w = safe_.ws;
    return w;
  }

  // D = alpha * op(a) op(b) + beta * C; alpha, beta point at the compute
  // type's scalars (host memory). C may be D.
  void run(const Ctx& ctx, const void* a, const void* b, const void* c, void* d, const void* alpha,
           const void* beta) const {
    const Algo* algo = nullptr;
    if (fast_.ok && aligned(a, 16) && aligned(b, 16) && aligned(c, 16) && aligned(d, 16))
      algo = &fast_;
    else if (safe_.ok && aligned(a, elem_) && aligned(b, elem_) && aligned(c, elem_) &&
             aligned(d, elem_))
      algo = &safe_;
    if (!algo) fail("CUDA: matmul buffers are not aligned for the planned cuBLASLt algorithm");
    if (algo->ws > ctx.workspace_bytes) fail("CUDA: matmul needs more workspace than was given");
    // cuBLASLt's A is our b and its B our a (see the top of the file).
    check(cublasLtMatmul(ctx.blas, desc_, alpha, b, a_, a, b_, beta, c, c_, d, c_, &algo->algo,
                         ctx.workspace, algo->ws, ctx.stream),
          "cublasLtMatmul");
  }

 private:
  static bool aligned(const void* p, size_t n) {
    return reinterpret_cast<uintptr_t>(p) % n == 0;
  }

  static cublasLtMatrixLayout_t layout(const NodeCtx& node, cudaDataType_t t, int64_t rows,
                                       int64_t cols, int64_t batch, int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    lt_check(node, cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), rows),
             "matrix layout");
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      const int64_t off = stride;
      cublasStatus_t s =
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off,
                                             sizeof off);
      if (s != CUBLAS_STATUS_SUCCESS) {
        cublasLtMatrixLayoutDestroy(l);
        lt_check(node, s, "batched layout");
      }
    }
    return l;
  }

  Algo pick(const Build& b, uint32_t align) const {
    Algo r;
    cublasLtMatmulPreference_t pref = nullptr;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return r;
    const uint64_t ws = kMaxWorkspace;
    bool ok = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &ws, sizeof ws) == CUBLAS_STATUS_SUCCESS;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align) ==
                     CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulHeuristicResult_t res[4] = {};
    int n = 0;
    if (ok && cublasLtMatmulAlgoGetHeuristic(b.blas, desc_, a_, b_, c_, c_, pref, 4, res, &n) ==
                  CUBLAS_STATUS_SUCCESS) {
      for (int i = 0; i < n; ++i)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= kMaxWorkspace) {
          r.algo = res[i].algo;
          r.ws = res[i].workspaceSize;
          r.ok = true;
          break;
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return r;
  }

  size_t elem_ = 4;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  Algo fast_, safe_;
};

// How addmm's self enters the result.
enum class SelfMode { None, Full, Broadcast };

class MatmulKernel : public Kernel {
 public:
  // Inputs a, b at ia, ib; self (addmm) at is >= 0 with alpha, beta.
  MatmulKernel(const Build& b, const Dims& d, int ia, int ib, int is, double alpha, double beta)
      : ia_(ia), ib_(ib), is_(is), f64_(b.node().input(ia).dtype == DType::F64) {
    const NodeCtx& node = b.node();
    const DType dt = node.input(ia).dtype;
    if (dt != DType::F32 && dt != DType::F64)
      node.fail("CUDA: matmul of " + std::string(dtype_name(dt)) + " not supported");
    nbytes_ = b.outputs()[0].nbytes();
    empty_out_ = d.batch == 0 || d.m == 0 || d.n == 0;
    zero_k_ = d.k == 0;
    if (is >= 0 && beta != 0.0) {
      const Shape& s = node.input(is).shape;
      mode_ = !zero_k_ && s == Shape{d.m, d.n} ? SelfMode::Full : SelfMode::Broadcast;
    }
    alpha_f_ = float(alpha);
    alpha_d_ = alpha;
    // The product adds to C with beta: self's own beta when self is C, 1
    // when the output already holds beta * self, else 0 (C is not read).
    double lt_beta = mode_ == SelfMode::Full ? beta : mode_ == SelfMode::Broadcast ? 1.0 : 0.0;
    beta_f_ = float(lt_beta);
    beta_d_ = lt_beta;
    self_beta_f_ = float(beta);
    self_beta_d_ = beta;
    if (empty_out_) return;
    if (mode_ == SelfMode::Broadcast) plan_broadcast(node, d, node.input(is).shape);
    if (!zero_k_) plan_ = std::make_unique<LtPlan>(b, dt, d);
  }
  MatmulKernel(const MatmulKernel&) = delete;
  MatmulKernel& operator=(const MatmulKernel&) = delete;
  ~MatmulKernel() override {
    if (self_desc_) cudnnDestroyTensorDescriptor(self_desc_);
    if (out_desc_) cudnnDestroyTensorDescriptor(out_desc_);
  }

  size_t workspace_bytes() const override { return plan_ ? plan_->workspace() : 0; }

  void run(const Tensor* in, Tensor* out, const Ctx& ctx) override {
    if (!out[0].data || empty_out_) return;
    void* d = out[0].data;
    if (mode_ == SelfMode::Broadcast) {
      // out = beta * self (beta 0 on the output: it is not read).
      check(cudnnSetStream(ctx.dnn, ctx.stream), "cudnnSetStream");
      const void* scale = f64_ ? static_cast<const void*>(&self_beta_d_) : &self_beta_f_;
      const void* zero = f64_ ? static_cast<const void*>(&zero_d_) : &zero_f_;
      check(cudnnAddTensor(ctx.dnn, scale, self_desc_, in[is_].data, zero, out_desc_, d),
            "addmm self (cudnnAddTensor)");
    } else if (zero_k_) {
      check(cudaMemsetAsync(d, 0, nbytes_, ctx.stream), "matmul with k = 0");
    }
    if (!plan_) return;  // k == 0: the product adds nothing
    const void* c = mode_ == SelfMode::Full ? in[is_].data : d;
    const void* alpha = f64_ ? static_cast<const void*>(&alpha_d_) : &alpha_f_;
    const void* beta = f64_ ? static_cast<const void*>(&beta_d_) : &beta_f_;
    plan_->run(ctx, in[ia_].data, in[ib_].data, c, d, alpha, beta);
  }

 private:
  // self (rank <= 2, dims 1 or equal) broadcast to (m, n) as 4-d tensors
  // (1, 1, rows, cols) for cudnnAddTensor.
  void plan_broadcast(const NodeCtx& node, const Dims& d, const Shape& s) {
    const int64_t big = std::numeric_limits<int32_t>::max();
    if (d.m > big || d.n > big || d.m * d.n > big)
      node.fail("CUDA: addmm output too large for a broadcast self");
    const int64_t sr = s.size() == 2 ? s[0] : 1;
    const int64_t sc = s.empty() ? 1 : s.back();
    const cudnnDataType_t t = f64_ ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    dnn_check(node, cudnnCreateTensorDescriptor(&self_desc_), "tensor descriptor");
    dnn_check(node, cudnnCreateTensorDescriptor(&out_desc_), "tensor descriptor");
    dnn_check(node,
              cudnnSetTensor4dDescriptor(self_desc_, CUDNN_TENSOR_NCHW, t, 1, 1, int(sr), int(sc)),
              "self descriptor");
    dnn_check(node,
              cudnnSetTensor4dDescriptor(out_desc_, CUDNN_TENSOR_NCHW, t, 1, 1, int(d.m), int(d.n)),
              "output descriptor");
  }

  int ia_, ib_, is_;
  bool f64_;
  size_t nbytes_ = 0;
  bool empty_out_ = false, zero_k_ = false;
  SelfMode mode_ = SelfMode::None;
  float alpha_f_ = 1, beta_f_ = 0, self_beta_f_ = 0, zero_f_ = 0;
  double alpha_d_ = 1, beta_d_ = 0, self_beta_d_ = 0, zero_d_ = 0;
  std::unique_ptr<LtPlan> plan_;
  cudnnTensorDescriptor_t self_desc_ = nullptr, out_desc_ = nullptr;
};

// mm (rank 2) and bmm (rank 3): a (B?, M, K) @ b (B?, K, N). The shapes
// were checked by the op's infer.
std::unique_ptr<Kernel> make_mm(const Build& b) {
  const Shape& a = b.node().input(0).shape;
  const Shape& w = b.node().input(1).shape;
  const size_t r = a.size();
  if ((r != 2 && r != 3) || w.size() != r)
    b.node().fail("CUDA: matmul of rank " + std::to_string(r) + " not supported");
  Dims d;
  d.batch = r == 3 ? a[0] : 1;
  d.m = a[r - 2];
  d.k = a[r - 1];
  d.n = w[r - 1];
  return std::make_unique<MatmulKernel>(b, d, 0, 1, -1, 1.0, 0.0);
}

// Rank-2 op(a) @ op(b) of inputs ia, ib: op = transpose per attrs trans_a /
// trans_b where the op has them (trainstep.matmul, trainstep.addmm).
Dims rank2_dims(const NodeCtx& n, int ia, int ib) {
  const Shape& a = n.input(ia).shape;
  const Shape& w = n.input(ib).shape;
  Dims d;
  d.ta = n.has_attr("trans_a") && n.attr_bool("trans_a");
  d.tb = n.has_attr("trans_b") && n.attr_bool("trans_b");
  d.m = d.ta ? a[1] : a[0];
  d.k = d.ta ? a[0] : a[1];
  d.n = d.tb ? w[0] : w[1];
  return d;
}

// addmm and trainstep.addmm: beta * self + alpha * (op(mat1) @ op(mat2)),
// self broadcastable to (M, N) and not read when beta is 0.
std::unique_ptr<Kernel> make_addmm(const Build& b) {
  const NodeCtx& n = b.node();
  if (n.input(1).shape.size() != 2 || n.input(2).shape.size() != 2 || n.input(0).shape.size() > 2)
    n.fail("CUDA: " + n.op() + " operands must be rank 2 (self rank <= 2)");
  return std::make_unique<MatmulKernel>(b, rank2_dims(n, 1, 2), 1, 2, 0, n.attr_float("alpha"),
                                        n.attr_float("beta"));
}

// trainstep.matmul: op(a) @ op(b), rank 2, op = transpose per trans_a / trans_b.
std::unique_ptr<Kernel> make_trans(const Build& b) {
  const NodeCtx& n = b.node();
  if (n.input(0).shape.size() != 2 || n.input(1).shape.size() != 2)
    n.fail("CUDA: trainstep.matmul operands must be rank 2");
  return std::make_unique<MatmulKernel>(b, rank2_dims(n, 0, 1), 0, 1, -1, 1.0, 0.0);
}

}  // namespace

void register_matmul(KernelTable& t) {
  t.add(opname::mm, make_mm);
  t.add(opname::bmm, make_mm);
  t.add(opname::addmm, make_addmm);
  t.add("trainstep.matmul", make_trans);
  t.add(opname::addmm_t, make_addmm);
}

}  // namespace ts::cuda

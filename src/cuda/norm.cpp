// CUDA kernels of batch norm and layer norm (device code in norm.cu): the
// geometry and the split of the statistics' sums are planned here, once per
// node; run() only fills in pointers and launches.
#include "cuda/kernel.h"
#include "cuda/rows.h"
#include "ops/layout.h"
#include "ops/norm.h"

namespace ts::cuda {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align256(size_t n) { return (n + 255) / 256 * 256; }

void expect_float(const NodeCtx& n, const TensorType& t) {
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    n.fail("CUDA: only float32 and float64 are supported, got " + t.str());
}

// ---- batch norm ---------------------------------------------------------------

// (N, C, S) of the activation, and P partial blocks per channel: enough
// blocks to fill the GPU, each summing at least ~4096 elements.
BatchNormParams bn_plan(const NodeCtx& n, int x_in, bool backward) {
  const TensorType& x = n.input(x_in);
  expect_float(n, x);
  if (x.shape.size() < 2) n.fail("CUDA: batch norm needs rank >= 2, got " + x.str());
  std::vector<int> acts = backward ? std::vector<int>{0, 1} : std::vector<int>{0};
  for (int i : acts)
    if (layout_block(port_layout(n, false, i, n.input(i))) > 1)
      n.fail("CUDA: channel-blocked layouts are not supported");
  if (layout_block(port_layout(n, true, 0, x)) > 1)
    n.fail("CUDA: channel-blocked layouts are not supported");
  BatchNormParams p;
  p.N = x.shape[0];
  p.C = x.shape[1];
  for (size_t d = 2; d < x.shape.size(); ++d) p.S *= x.shape[d];
  p.f64 = x.dtype == DType::F64;
  p.backward = backward;
  p.training = n.attr_bool(backward ? "train" : "training");
  p.eps = n.attr_float("eps");
  const int64_t M = p.N * p.S;
  p.P = 1;
  if (p.C > 0 && M > 0) {
    p.P = std::max<int64_t>(1, std::min(ceil_div(528, p.C), ceil_div(M, 4096)));
    p.chunk = ceil_div(M, p.P);
    p.P = ceil_div(M, p.chunk);
  }
  return p;
}

// Workspace: the partial sums, then the per-channel coefficients.
size_t bn_coef_offset(const BatchNormParams& p) {
  return align256(static_cast<size_t>(p.C * p.P) * 2 * sizeof(double));
}
size_t bn_workspace(const BatchNormParams& p) {
  return bn_coef_offset(p) + static_cast<size_t>(p.C) * 4 * sizeof(double);
}

// Inputs: input, weight?, bias?, running_mean?, running_var?; attrs
// training, eps (momentum unused: the exporter updates running stats in
// the graph). Outputs: out, save_mean, save_invstd (both [0] in eval mode).
std::unique_ptr<Kernel> make_bn(const Build& b) {
  const BatchNormParams plan = bn_plan(b.node(), 0, false);
  if (plan.training && (b.node().has_input(3) || b.node().has_input(4)))
    b.node().fail("CUDA: training mode with running stats is not supported");
  if (!plan.training && (!b.node().has_input(3) || !b.node().has_input(4)))
    b.node().fail("CUDA: eval mode needs running_mean and running_var");
  return fn_kernel(
      [plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
        BatchNormParams p = plan;
        p.x = in[0].data;
        p.w = in[1].data;
        p.b = in[2].data;
        p.run_mean = in[3].data;
        p.run_var = in[4].data;
        p.out0 = out[0].data;
        if (p.training) {  // eval mode's saves are empty
          p.out1 = out[1].data;
          p.out2 = out[2].data;
        }
        if (!p.out0 && !p.out1 && !p.out2) return;
        p.part = static_cast<double*>(ctx.workspace);
        p.coef = static_cast<char*>(ctx.workspace) + bn_coef_offset(p);
        launch_batch_norm(p, ctx.stream);
        check_launch("native_batch_norm");
      },
      bn_workspace(plan));
}

// Inputs: grad_out, input, weight?, running_mean?, running_var?,
// save_mean?, save_invstd?; attrs train, eps, output_mask. Outputs:
// grad_input, grad_weight, grad_bias (each skipped when unread).
std::unique_ptr<Kernel> make_bn_backward(const Build& b) {
  const NodeCtx& n = b.node();
  const BatchNormParams plan = bn_plan(n, 1, true);
  if (n.input(0) != n.input(1)) n.fail("CUDA: grad_out must match input");
  if (plan.training && (!n.has_input(5) || !n.has_input(6)))
    n.fail("CUDA: train=true needs save_mean and save_invstd");
  if (!plan.training && (!n.has_input(3) || !n.has_input(4)))
    n.fail("CUDA: train=false needs running_mean and running_var");
  return fn_kernel(
      [plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
        BatchNormParams p = plan;
        p.dy = in[0].data;
        p.x = in[1].data;
        p.w = in[2].data;
        p.run_mean = in[3].data;
        p.run_var = in[4].data;
        p.save_mean = in[5].data;
        p.save_invstd = in[6].data;
        p.out0 = out[0].data;
        p.out1 = out[1].data;
        p.out2 = out[2].data;
        if (!p.out0 && !p.out1 && !p.out2) return;
        p.part = static_cast<double*>(ctx.workspace);
        p.coef = static_cast<char*>(ctx.workspace) + bn_coef_offset(p);
        launch_batch_norm(p, ctx.stream);
        check_launch("native_batch_norm_backward");
      },
      bn_workspace(plan));
}

// ---- layer norm ---------------------------------------------------------------

// M rows of N = numel(normalized_shape), for the input at x_in.
LayerNormParams ln_plan(const NodeCtx& n, int x_in) {
  const TensorType& x = n.input(x_in);
  expect_float(n, x);
  const Shape ns = n.attr_ints("normalized_shape");
  const size_t r = x.shape.size(), k = ns.size();
  if (k == 0 || k > r || !std::equal(ns.begin(), ns.end(), x.shape.end() - k))
    n.fail("CUDA: normalized_shape is not the trailing shape of input " + x.str());
  LayerNormParams p;
  p.N = shape_numel(ns);
  p.M = shape_numel(Shape(x.shape.begin(), x.shape.end() - k));
  p.f64 = x.dtype == DType::F64;
  p.threads = rowk::row_threads(p.N);
  return p;
}

// Inputs: input, weight?, bias?; attrs normalized_shape, eps. Outputs: out,
// mean, rstd.
std::unique_ptr<Kernel> make_ln(const Build& b) {
  LayerNormParams plan = ln_plan(b.node(), 0);
  plan.eps = b.node().attr_float("eps");
  return fn_kernel([plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
    LayerNormParams p = plan;
    p.x = in[0].data;
    p.w = in[1].data;
    p.b = in[2].data;
    p.out0 = out[0].data;
    p.out1 = out[1].data;
    p.out2 = out[2].data;
    launch_layer_norm(p, ctx.stream);
    check_launch("native_layer_norm");
  });
}

// Inputs: grad_out, input, mean, rstd, weight?, bias?; attrs
// normalized_shape, output_mask. Outputs: grad_input, grad_weight,
// grad_bias (each skipped when unread).
std::unique_ptr<Kernel> make_ln_backward(const Build& b) {
  const NodeCtx& n = b.node();
  LayerNormParams plan = ln_plan(n, 1);
  if (n.input(0) != n.input(1)) n.fail("CUDA: grad_out must match input");
  for (int i : {2, 3})
    if (n.input(i).dtype != n.input(1).dtype || n.input(i).numel() != plan.M)
      n.fail("CUDA: mean/rstd must hold one value per row");
  // Column sums of dw/db: P groups of rows, each at least 32 rows, and
  // about 64K (group, column) threads.
  plan.P = 1;
  if (plan.M > 0 && plan.N > 0) {
    plan.P = std::max<int64_t>(1, std::min(ceil_div(65536, plan.N), ceil_div(plan.M, 32)));
    plan.rows_per_part = ceil_div(plan.M, plan.P);
    plan.P = ceil_div(plan.M, plan.rows_per_part);
  }
  const size_t ws = static_cast<size_t>(2 * plan.P * plan.N) * sizeof(double);
  return fn_kernel(
      [plan](const Tensor* in, Tensor* out, const Ctx& ctx) {
        LayerNormParams p = plan;
        p.dy = in[0].data;
        p.x = in[1].data;
        p.mean_in = in[2].data;
        p.rstd_in = in[3].data;
        p.w = in[4].data;
        p.out0 = out[0].data;
        p.out1 = out[1].data;
        p.out2 = out[2].data;
        p.part = static_cast<double*>(ctx.workspace);
        launch_layer_norm_backward(p, ctx.stream);
        check_launch("native_layer_norm_backward");
      },
      ws);
}

}  // namespace

void register_norm(KernelTable& t) {
  t.add(opname::batch_norm, make_bn);
  t.add(opname::batch_norm_backward, make_bn_backward);
  t.add(opname::layer_norm, make_ln);
  t.add(opname::layer_norm_backward, make_ln_backward);
}

}  // namespace ts::cuda

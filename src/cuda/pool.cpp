// CUDA kernels of the pooling ops: max_pool2d_with_indices, avg_pool2d,
// adaptive avg/max pooling and their backward (float32, float64). The
// geometry comes from the node's attrs and its inferred types (the CPU
// OpDef's infer has checked them); the device code is pool.cu. The
// oneDNN-only code pair (trainstep.max_pool2d_code*) is not handled: the
// CUDA pipeline never makes it.
#include <string>

#include "cuda/kernel.h"
#include "cuda/pool_launch.h"

namespace ts::cuda {
namespace {

// The (N,)C,H,W planes of x and the output cells OH x OW of out.
PoolParams geometry(const NodeCtx& n, const TensorType& x, const Shape& out) {
  if (x.dtype != DType::F32 && x.dtype != DType::F64)
    n.fail("CUDA: pooling of " + x.str() + " not supported (float32 and float64 only)");
  const size_t r = x.shape.size();
  if (r < 3 || out.size() != r) n.fail("CUDA: pooling of " + x.str() + " not supported");
  PoolParams p;
  p.f64 = x.dtype == DType::F64;
  p.H = x.shape[r - 2], p.W = x.shape[r - 1];
  p.OH = out[r - 2], p.OW = out[r - 1];
  p.planes = 1;
  for (size_t i = 0; i + 2 < r; ++i) p.planes *= x.shape[i];
  return p;
}

void read_windows(const NodeCtx& n, PoolParams& p, bool dilation) {
  n.attr_pair("kernel_size", p.kh, p.kw);
  p.sh = p.kh, p.sw = p.kw;
  n.attr_pair("stride", p.sh, p.sw, true);
  n.attr_pair("padding", p.ph, p.pw);
  if (dilation) n.attr_pair("dilation", p.dh, p.dw);
  if (p.kh < 1 || p.kw < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 || p.ph < 0 || p.pw < 0)
    n.fail("CUDA: pooling window attributes not supported");
}

// Adaptive windows multiply an index by a size: keep that inside int64.
void check_adaptive(const NodeCtx& n, const PoolParams& p) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  if (p.H > kLimit || p.W > kLimit || p.OH > kLimit || p.OW > kLimit)
    n.fail("CUDA: adaptive pooling sizes above 2^30 not supported");
}

// ---------------------------------------------------------------- max

std::unique_ptr<Kernel> max_forward(const PoolParams& p) {
  return fn_kernel([p](const Tensor* in, Tensor* out, const Ctx& c) {
    int64_t* idx = out[1].as<int64_t>();
    if (!out[0].data && !idx) return;
    if (p.planes * p.OH * p.OW == 0) return;
    launch_max_pool(p, in[0].data, out[0].data, idx, c.stream);
    check_launch("max_pool2d");
  });
}

// Inputs grad_output, self, indices.
std::unique_ptr<Kernel> max_backward(const PoolParams& p, bool atomic) {
  return fn_kernel([p, atomic](const Tensor* in, Tensor* out, const Ctx& c) {
    if (!out[0].data) return;
    if (out[0].nbytes() == 0) return;
    check(cudaMemsetAsync(out[0].data, 0, out[0].nbytes(), c.stream), "max_pool2d backward: zero");
    if (p.planes * p.OH * p.OW == 0) return;
    launch_max_unpool(p.planes, p.H * p.W, p.OH * p.OW, p.f64, atomic, in[0].data,
                      in[2].as<int64_t>(), out[0].data, c.stream);
    check_launch("max_pool2d backward");
  });
}

std::unique_ptr<Kernel> make_max_pool(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(0), b.outputs().at(0).shape);
  read_windows(n, p, true);
  return max_forward(p);
}

std::unique_ptr<Kernel> make_max_pool_backward(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(1), n.input(0).shape);
  read_windows(n, p, true);
  // Windows that share no input cell never add twice to one.
  const bool overlap = (p.kh - 1) * p.dh + 1 > p.sh || (p.kw - 1) * p.dw + 1 > p.sw;
  return max_backward(p, overlap);
}

std::unique_ptr<Kernel> make_adaptive_max(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(0), b.outputs().at(0).shape);
  p.adaptive = true;
  check_adaptive(n, p);
  return max_forward(p);
}

std::unique_ptr<Kernel> make_adaptive_max_backward(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(1), n.input(0).shape);
  p.adaptive = true;
  check_adaptive(n, p);
  if (p.OH < 1 || p.OW < 1) n.fail("CUDA: empty adaptive pooling output not supported");
  // Adaptive windows tile the input exactly when the sizes divide.
  const bool overlap = p.H % p.OH != 0 || p.W % p.OW != 0;
  return max_backward(p, overlap);
}

// ---------------------------------------------------------------- average

std::unique_ptr<Kernel> avg_forward(const PoolParams& p) {
  return fn_kernel([p](const Tensor* in, Tensor* out, const Ctx& c) {
    if (!out[0].data) return;
    if (p.planes * p.OH * p.OW == 0) return;
    launch_avg_pool(p, in[0].data, out[0].data, c.stream);
    check_launch("avg_pool2d");
  });
}

// Inputs grad_output, self.
std::unique_ptr<Kernel> avg_backward(const PoolParams& p) {
  return fn_kernel([p](const Tensor* in, Tensor* out, const Ctx& c) {
    if (!out[0].data) return;
    if (p.planes * p.H * p.W == 0) return;
    launch_avg_pool_backward(p, in[0].data, out[0].data, c.stream);
    check_launch("avg_pool2d backward");
  });
}

void read_avg(const NodeCtx& n, PoolParams& p) {
  read_windows(n, p, false);
  p.include_pad = n.attr_bool("count_include_pad");
  if (n.has_attr("divisor_override")) {
    p.divisor = n.attr_int("divisor_override");
    if (p.divisor == 0) n.fail("CUDA: divisor_override 0 not supported");
  }
}

std::unique_ptr<Kernel> make_avg_pool(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(0), b.outputs().at(0).shape);
  read_avg(n, p);
  return avg_forward(p);
}

std::unique_ptr<Kernel> make_avg_pool_backward(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(1), n.input(0).shape);
  read_avg(n, p);
  if (p.OH < 1 || p.OW < 1) n.fail("CUDA: empty avg_pool2d output not supported");
  return avg_backward(p);
}

std::unique_ptr<Kernel> make_adaptive_avg(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(0), b.outputs().at(0).shape);
  p.adaptive = true;
  check_adaptive(n, p);
  return avg_forward(p);
}

std::unique_ptr<Kernel> make_adaptive_avg_backward(const Build& b) {
  const NodeCtx& n = b.node();
  PoolParams p = geometry(n, n.input(1), n.input(0).shape);
  p.adaptive = true;
  check_adaptive(n, p);
  if (p.OH < 1 || p.OW < 1) n.fail("CUDA: empty adaptive pooling output not supported");
  return avg_backward(p);
}

}  // namespace

void register_pool(KernelTable& t) {
  t.add("aten.max_pool2d_with_indices.default", make_max_pool);
  t.add("aten.max_pool2d_with_indices_backward.default", make_max_pool_backward);
  t.add("aten.avg_pool2d.default", make_avg_pool);
  t.add("aten.avg_pool2d_backward.default", make_avg_pool_backward);
  t.add("aten._adaptive_avg_pool2d.default", make_adaptive_avg);
  t.add("aten._adaptive_avg_pool2d_backward.default", make_adaptive_avg_backward);
  t.add("aten.adaptive_max_pool2d.default", make_adaptive_max);
  t.add("aten.adaptive_max_pool2d_backward.default", make_adaptive_max_backward);
}

}  // namespace ts::cuda

// CUDA kernels of the pooling ops: max_pool2d_with_indices, avg_pool2d,
// adaptive avg/max pooling and their backward (float32, float64). The
// geometry is the CPU ops' own (ops/pool.h, ops/avg_pool.h); the device
// code is pool.cu. The
// oneDNN-only code pair (trainstep.max_pool2d_code*) is not handled: the
// CUDA pipeline never makes it.
#include <string>

#include "cuda/kernel.h"
#include "cuda/pool_launch.h"
#include "ops/avg_pool.h"
#include "ops/pool.h"

namespace ts::cuda {
namespace {

// The plan's planes and output cells; windows from each op's shared
// geometry (ops/pool.h, ops/avg_pool.h).
PoolParams planes(const PoolPlanes& g, int64_t OH, int64_t OW) {
  PoolParams p;
  p.f64 = g.dtype == DType::F64;
  p.planes = g.planes, p.H = g.H, p.W = g.W;
  p.OH = OH, p.OW = OW;
  return p;
}

PoolParams max_params(const NodeCtx& n, const TensorType& x) {
  const PoolGeom g = max_pool_geom(n, x);
  PoolParams p = planes({x.dtype, g.planes, g.H, g.W}, g.OH, g.OW);
  p.kh = g.kh, p.kw = g.kw, p.sh = g.sh, p.sw = g.sw;
  p.ph = g.ph, p.pw = g.pw, p.dh = g.dh, p.dw = g.dw;
  return p;
}

PoolParams avg_params(const NodeCtx& n, const TensorType& x) {
  const AvgGeom g = avg_pool_geom(n, x);
  PoolParams p = planes(g.p, g.OH, g.OW);
  p.kh = g.kh, p.kw = g.kw, p.sh = g.sh, p.sw = g.sw, p.ph = g.ph, p.pw = g.pw;
  p.include_pad = g.include_pad;
  p.divisor = g.divisor;
  return p;
}

PoolParams adaptive_params(const AdaGeom& g) {
  PoolParams p = planes(g.p, g.OH, g.OW);
  p.adaptive = true;
  return p;
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
  return max_forward(max_params(n, n.input(0)));
}

std::unique_ptr<Kernel> make_max_pool_backward(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = max_params(n, n.input(1));
  // Windows that share no input cell never add twice to one.
  const bool overlap = (p.kh - 1) * p.dh + 1 > p.sh || (p.kw - 1) * p.dw + 1 > p.sw;
  return max_backward(p, overlap);
}

std::unique_ptr<Kernel> make_adaptive_max(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = adaptive_params(adaptive_pool_geom(n, n.input(0), nullptr));
  check_adaptive(n, p);
  return max_forward(p);
}

std::unique_ptr<Kernel> make_adaptive_max_backward(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = adaptive_params(adaptive_pool_bwd_geom(n));
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

std::unique_ptr<Kernel> make_avg_pool(const Build& b) {
  const NodeCtx& n = b.node();
  return avg_forward(avg_params(n, n.input(0)));
}

std::unique_ptr<Kernel> make_avg_pool_backward(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = avg_params(n, n.input(1));
  if (p.OH < 1 || p.OW < 1) n.fail("CUDA: empty avg_pool2d output not supported");
  return avg_backward(p);
}

std::unique_ptr<Kernel> make_adaptive_avg(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = adaptive_params(adaptive_pool_geom(n, n.input(0), nullptr));
  check_adaptive(n, p);
  return avg_forward(p);
}

std::unique_ptr<Kernel> make_adaptive_avg_backward(const Build& b) {
  const NodeCtx& n = b.node();
  const PoolParams p = adaptive_params(adaptive_pool_bwd_geom(n));
  check_adaptive(n, p);
  if (p.OH < 1 || p.OW < 1) n.fail("CUDA: empty adaptive pooling output not supported");
  return avg_backward(p);
}

}  // namespace

void register_pool(KernelTable& t) {
  t.add(opname::max_pool2d, make_max_pool);
  t.add(opname::max_pool2d_backward, make_max_pool_backward);
  t.add(opname::avg_pool2d, make_avg_pool);
  t.add(opname::avg_pool2d_backward, make_avg_pool_backward);
  t.add(opname::adaptive_avg_pool2d, make_adaptive_avg);
  t.add(opname::adaptive_avg_pool2d_backward, make_adaptive_avg_backward);
  t.add(opname::adaptive_max_pool2d, make_adaptive_max);
  t.add(opname::adaptive_max_pool2d_backward, make_adaptive_max_backward);
}

}  // namespace ts::cuda

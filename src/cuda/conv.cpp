// aten.convolution.default and aten.convolution_backward.default on cuDNN's
// legacy API: NCHW tensors, OIHW weights, float32 (or float64). A 1-D
// convolution (N, C, L) is the 2-D one with H = 1, the same bytes.
// Descriptors and algorithms are made at build time. The descriptor's math
// type is CUDNN_FMA_MATH, so float32 never runs on TF32 tensor cores.
// Algorithms come from the cudnnGet*Algorithm_v7 heuristics; FFT and
// Winograd ones are taken only when nothing else fits, as their rounding
// differs most from a direct sum. Transposed convolutions and
// channel-blocked layouts are refused.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda/kernel.h"
#include "ops/conv_transpose.h"
#include "ops/layout.h"

namespace ts::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t(256) << 20;

void dnn_check(const NodeCtx& node, cudnnStatus_t s, const std::string& what) {
  if (s != CUDNN_STATUS_SUCCESS)
    node.fail("CUDA: cuDNN " + what + ": " + cudnnGetErrorString(s));
}

// Tensor and filter descriptors of one convolution (input at ix, weight at
// iw of the node), with 1 and 0 in the compute type for alpha / beta.
class ConvDescs {
 public:
  ConvDescs(const NodeCtx& node, int ix, int iw) {
    if (node.has_attr("transposed") && node.attr_bool("transposed"))
      node.fail("CUDA: transposed convolution not supported");
    const TensorType& x = node.input(ix);
    for (int i = 0; i < node.num_inputs(); ++i)
      if (node.has_input(i) && port_layout(node, false, i, node.input(i)) != Layout::Plain)
        node.fail("CUDA: channel-blocked layouts not supported");
    if (port_layout(node, true, 0, x) != Layout::Plain)
      node.fail("CUDA: channel-blocked layouts not supported");
    f64_ = x.dtype == DType::F64;
    g_ = conv_geom(node, ix, iw);  // the CPU op's geometry and checks
    const ConvGeom& g = g_;
    const int64_t big = std::numeric_limits<int>::max();
    for (int64_t v : {g.N, g.C, g.H, g.W, g.O, g.KH, g.KW, g.G, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw})
      if (v > big) node.fail("CUDA: convolution size " + std::to_string(v) + " too large");
    const cudnnDataType_t t = f64_ ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    dnn_check(node, cudnnCreateTensorDescriptor(&x_), "tensor descriptor");
    dnn_check(node, cudnnCreateTensorDescriptor(&y_), "tensor descriptor");
    dnn_check(node, cudnnCreateTensorDescriptor(&bias_), "tensor descriptor");
    dnn_check(node, cudnnCreateFilterDescriptor(&w_), "filter descriptor");
    dnn_check(node, cudnnCreateConvolutionDescriptor(&conv_), "convolution descriptor");
    dnn_check(node,
              cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, t, int(g.N), int(g.C), int(g.H),
                                         int(g.W)),
              "input descriptor");
    dnn_check(node,
              cudnnSetFilter4dDescriptor(w_, t, CUDNN_TENSOR_NCHW, int(g.O), int(g.C / g.G),
                                         int(g.KH), int(g.KW)),
              "weight descriptor");
    dnn_check(node,
              cudnnSetConvolution2dDescriptor(conv_, int(g.ph), int(g.pw), int(g.sh), int(g.sw),
                                              int(g.dh), int(g.dw), CUDNN_CROSS_CORRELATION, t),
              "convolution descriptor");
    dnn_check(node, cudnnSetConvolutionGroupCount(conv_, int(g.G)), "group count");
    dnn_check(node, cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH), "math type");
    int n = 0, c = 0, h = 0, wd = 0;
    dnn_check(node, cudnnGetConvolution2dForwardOutputDim(conv_, x_, w_, &n, &c, &h, &wd),
              "output size");
    if (n != g.N || c != g.O || h != g.OH || wd != g.OW)
      node.fail("CUDA: cuDNN's convolution output size differs from the op's");
    if (g.N * g.C * g.H * g.W > big || g.N * g.O * g.OH * g.OW > big)
      node.fail("CUDA: convolution tensors over 2^31 elements not supported");
    dnn_check(node,
              cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, t, int(g.N), int(g.O), int(g.OH),
                                         int(g.OW)),
              "output descriptor");
    dnn_check(node, cudnnSetTensor4dDescriptor(bias_, CUDNN_TENSOR_NCHW, t, 1, int(g.O), 1, 1),
              "bias descriptor");
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
  ~ConvDescs() {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (bias_) cudnnDestroyTensorDescriptor(bias_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  }

  // The output (or grad_output) shape the descriptors describe, as the node
  // types it: rank 3 for a 1-D convolution.
  Shape out_shape() const { return conv_out_shape(g_); }

  const void* one() const { return f64_ ? static_cast<const void*>(&one_d_) : &one_f_; }
  const void* zero() const { return f64_ ? static_cast<const void*>(&zero_d_) : &zero_f_; }

  ConvGeom g_;
  bool f64_ = false;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, bias_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;

 private:
  float one_f_ = 1.f, zero_f_ = 0.f;
  double one_d_ = 1.0, zero_d_ = 0.0;
};

// The heuristics' ranked candidates, those with a direct-sum rounding
// (`exact`) first; each is tried with `ws` (the workspace size query, which
// also rejects an algorithm these descriptors cannot run) and the first
// that fits kMaxWorkspace is taken. Returns false if none.
template <class Perf, class Algo, class Exact, class Ws>
bool choose(const Perf* perf, int n, Exact exact, Ws ws, Algo& algo, size_t& bytes) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH ||
          p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        continue;
      if (pass == 0 && !exact(p.algo)) continue;
      size_t b = 0;
      if (ws(p.algo, b) != CUDNN_STATUS_SUCCESS || b > kMaxWorkspace) continue;
      algo = p.algo;
      bytes = b;
      return true;
    }
  return false;
}

void set_stream(const Ctx& ctx) { check(cudnnSetStream(ctx.dnn, ctx.stream), "cudnnSetStream"); }

class ConvFwdKernel : public Kernel {
 public:
  explicit ConvFwdKernel(const Build& b) : d_(b.node(), 0, 1) {
    const NodeCtx& node = b.node();
    bias_ = node.has_input(2);
    if (b.outputs()[0].shape != d_.out_shape())
      node.fail("CUDA: convolution output type differs from cuDNN's");
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    dnn_check(node,
              cudnnGetConvolutionForwardAlgorithm_v7(b.dnn, d_.x_, d_.w_, d_.conv_, d_.y_,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
              "forward algorithm heuristic");
    auto exact = [](cudnnConvolutionFwdAlgo_t a) {
      return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
             a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
             a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    };
    auto ws = [&](cudnnConvolutionFwdAlgo_t a, size_t& bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(b.dnn, d_.x_, d_.w_, d_.conv_, d_.y_, a,
                                                     &bytes);
    };
    if (!choose(perf, n, exact, ws, algo_, ws_))
      node.fail("CUDA: cuDNN has no forward algorithm for this convolution");
  }

  size_t workspace_bytes() const override { return ws_; }

  void run(const Tensor* in, Tensor* out, const Ctx& ctx) override {
    if (!out[0].data) return;
    set_stream(ctx);
    check(cudnnConvolutionForward(ctx.dnn, d_.one(), d_.x_, in[0].data, d_.w_, in[1].data,
                                  d_.conv_, algo_, ctx.workspace, ws_, d_.zero(), d_.y_,
                                  out[0].data),
          "cudnnConvolutionForward");
    if (bias_)
      check(cudnnAddTensor(ctx.dnn, d_.one(), d_.bias_, in[2].data, d_.one(), d_.y_, out[0].data),
            "convolution bias (cudnnAddTensor)");
  }

 private:
  ConvDescs d_;
  bool bias_ = false;
  cudnnConvolutionFwdAlgo_t algo_{};
  size_t ws_ = 0;
};

// Inputs (grad_output, input, weight); outputs grad_input, grad_weight,
// grad_bias per output_mask, each skipped when its data is nullptr.
class ConvBwdKernel : public Kernel {
 public:
  explicit ConvBwdKernel(const Build& b) : d_(b.node(), 1, 2) {
    const NodeCtx& node = b.node();
    std::vector<bool> m = conv_output_mask(node);
    want_in_ = m[0];
    want_w_ = m[1];
    want_b_ = m[2];
    const TensorType& go = node.input(0);
    if (go.dtype != node.input(1).dtype || go.shape != d_.out_shape())
      node.fail("CUDA: grad_output type differs from cuDNN's output size");
    if (want_in_) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int n = 0;
      dnn_check(node,
                cudnnGetConvolutionBackwardDataAlgorithm_v7(b.dnn, d_.w_, d_.y_, d_.conv_, d_.x_,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                            &n, perf),
                "backward data algorithm heuristic");
      auto exact = [](cudnnConvolutionBwdDataAlgo_t a) {
        return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
      };
      auto ws = [&](cudnnConvolutionBwdDataAlgo_t a, size_t& bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(b.dnn, d_.w_, d_.y_, d_.conv_, d_.x_,
                                                            a, &bytes);
      };
      if (!choose(perf, n, exact, ws, data_algo_, data_ws_))
        node.fail("CUDA: cuDNN has no backward data algorithm for this convolution");
    }
    if (want_w_) {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int n = 0;
      dnn_check(node,
                cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                    b.dnn, d_.x_, d_.y_, d_.conv_, d_.w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                    &n, perf),
                "backward filter algorithm heuristic");
      auto exact = [](cudnnConvolutionBwdFilterAlgo_t a) {
        return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
               a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
      };
      auto ws = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t& bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(b.dnn, d_.x_, d_.y_, d_.conv_,
                                                              d_.w_, a, &bytes);
      };
      if (!choose(perf, n, exact, ws, filter_algo_, filter_ws_))
        node.fail("CUDA: cuDNN has no backward filter algorithm for this convolution");
    }
  }

  size_t workspace_bytes() const override { return std::max(data_ws_, filter_ws_); }

  void run(const Tensor* in, Tensor* out, const Ctx& ctx) override {
    const void* dy = in[0].data;
    set_stream(ctx);
    if (want_w_ && out[1].data)
      check(cudnnConvolutionBackwardFilter(ctx.dnn, d_.one(), d_.x_, in[1].data, d_.y_, dy,
                                           d_.conv_, filter_algo_, ctx.workspace, filter_ws_,
                                           d_.zero(), d_.w_, out[1].data),
            "cudnnConvolutionBackwardFilter");
    if (want_b_ && out[2].data)
      check(cudnnConvolutionBackwardBias(ctx.dnn, d_.one(), d_.y_, dy, d_.zero(), d_.bias_,
                                         out[2].data),
            "cudnnConvolutionBackwardBias");
    if (want_in_ && out[0].data)
      check(cudnnConvolutionBackwardData(ctx.dnn, d_.one(), d_.w_, in[2].data, d_.y_, dy, d_.conv_,
                                         data_algo_, ctx.workspace, data_ws_, d_.zero(), d_.x_,
                                         out[0].data),
            "cudnnConvolutionBackwardData");
  }

 private:
  ConvDescs d_;
  bool want_in_ = false, want_w_ = false, want_b_ = false;
  cudnnConvolutionBwdDataAlgo_t data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo_{};
  size_t data_ws_ = 0, filter_ws_ = 0;
};

std::unique_ptr<Kernel> make_conv(const Build& b) { return std::make_unique<ConvFwdKernel>(b); }
std::unique_ptr<Kernel> make_conv_bwd(const Build& b) {
  return std::make_unique<ConvBwdKernel>(b);
}

}  // namespace

void register_conv(KernelTable& t) {
  t.add(opname::convolution, make_conv);
  t.add(opname::convolution_backward, make_conv_bwd);
}

}  // namespace ts::cuda

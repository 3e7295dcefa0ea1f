// CUDA kernels of the matmul family (mm, bmm, addmm, trainstep.matmul on
// cuBLASLt) and the conv family (convolution forward / backward on cuDNN)
// against the CPU kernels: random shapes, the model zoo's exact shapes,
// edge cases, float64, refusals at build time, and a run under CUDA graph
// capture. Summation orders differ between the libraries, so inputs are
// scaled to keep results O(1) and float32 compares to 1e-4.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>

#include "cuda_op_test.h"

namespace {

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using ts_cuda_test::cpu_gpu_agree;
using ts_cuda_test::random_tensor;
using ts_cuda_test::Tolerance;
using json = nlohmann::json;

const Tolerance kF32{1e-4, 1e-4};
const Tolerance kF64{1e-9, 1e-9};

// Values in +-r with r chosen so a sum of `terms` products of such values
// with +-1 values stays O(1).
double scale_for(int64_t terms) { return std::min(1.0, 4.0 / std::sqrt(double(std::max<int64_t>(terms, 1)))); }

// ---- matmul ----

::testing::AssertionResult mm_agree(const Shape& a, const Shape& b, DType dt, std::mt19937& rng) {
  const int64_t k = a.back();
  HostTensor x = random_tensor(dt, a, rng);
  HostTensor y = random_tensor(dt, b, rng, -scale_for(k), scale_for(k));
  const char* op = a.size() == 3 ? "aten.bmm.default" : "aten.mm.default";
  return cpu_gpu_agree(op, json::object(), {&x, &y}, dt == DType::F64 ? kF64 : kF32);
}

// trainstep.matmul with logical op(a) (m, k) @ op(b) (k, n).
::testing::AssertionResult trans_agree(int64_t m, int64_t k, int64_t n, bool ta, bool tb, DType dt,
                                       std::mt19937& rng) {
  HostTensor a = random_tensor(dt, ta ? Shape{k, m} : Shape{m, k}, rng);
  HostTensor b = random_tensor(dt, tb ? Shape{n, k} : Shape{k, n}, rng, -scale_for(k), scale_for(k));
  return cpu_gpu_agree("trainstep.matmul", {{"trans_a", ta}, {"trans_b", tb}}, {&a, &b},
                       dt == DType::F64 ? kF64 : kF32);
}

TEST(CudaMatmul, MmRandomShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> dim(1, 70);
  const Shape fixed[][2] = {{{1, 1}, {1, 1}}, {{1, 7}, {7, 1}}, {{5, 1}, {1, 9}},
                            {{3, 5}, {5, 7}}, {{17, 33}, {33, 1}}, {{128, 129}, {129, 127}}};
  for (const auto& s : fixed) {
    EXPECT_TRUE(mm_agree(s[0], s[1], DType::F32, rng));
    EXPECT_TRUE(mm_agree(s[0], s[1], DType::F64, rng));
  }
  for (int i = 0; i < 20; ++i) {
    const int64_t m = dim(rng), k = dim(rng), n = dim(rng);
    EXPECT_TRUE(mm_agree({m, k}, {k, n}, i % 4 == 3 ? DType::F64 : DType::F32, rng))
        << m << "x" << k << " @ " << k << "x" << n;
  }
}

TEST(CudaMatmul, MmZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  // MNIST backward, ResNet's fc backward, the transformer's backward.
  const int64_t shapes[][3] = {{64, 10, 128},    {64, 128, 9216},  {128, 10, 64},
                               {2048, 256, 128}, {2048, 128, 512}, {2048, 512, 128},
                               {2048, 128, 128}, {2048, 384, 128}};
  for (const auto& s : shapes)
    EXPECT_TRUE(mm_agree({s[0], s[1]}, {s[1], s[2]}, DType::F32, rng))
        << s[0] << "x" << s[1] << " @ " << s[1] << "x" << s[2];
}

TEST(CudaMatmul, MmEmpty) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  EXPECT_TRUE(mm_agree({3, 0}, {0, 4}, DType::F32, rng));  // k = 0: zeros
  EXPECT_TRUE(mm_agree({0, 5}, {5, 4}, DType::F32, rng));
  EXPECT_TRUE(mm_agree({3, 5}, {5, 0}, DType::F32, rng));
  EXPECT_TRUE(mm_agree({2, 3, 0}, {2, 0, 4}, DType::F32, rng));
}

TEST(CudaMatmul, BmmRandomAndZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  // The transformer's attention (128 = batch 32 x 4 heads), forward and backward.
  const int64_t zoo[][4] = {{128, 64, 32, 64}, {128, 64, 64, 32}, {128, 32, 64, 64},
                            {128, 64, 32, 32}};
  for (const auto& s : zoo)
    EXPECT_TRUE(mm_agree({s[0], s[1], s[2]}, {s[0], s[2], s[3]}, DType::F32, rng));
  std::uniform_int_distribution<int64_t> dim(1, 40);
  const int64_t fixed[][4] = {{1, 1, 1, 1}, {1, 5, 3, 7}, {3, 1, 9, 1}, {7, 13, 1, 5}};
  for (const auto& s : fixed) {
    EXPECT_TRUE(mm_agree({s[0], s[1], s[2]}, {s[0], s[2], s[3]}, DType::F32, rng));
    EXPECT_TRUE(mm_agree({s[0], s[1], s[2]}, {s[0], s[2], s[3]}, DType::F64, rng));
  }
  for (int i = 0; i < 12; ++i) {
    const int64_t bt = dim(rng) % 9 + 1, m = dim(rng), k = dim(rng), n = dim(rng);
    EXPECT_TRUE(mm_agree({bt, m, k}, {bt, k, n}, i % 3 == 2 ? DType::F64 : DType::F32, rng))
        << bt << " x " << m << "x" << k << " @ " << k << "x" << n;
  }
}

TEST(CudaMatmul, TransRandomShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> dim(1, 65);
  for (int f = 0; f < 4; ++f) {
    const bool ta = f & 1, tb = f & 2;
    EXPECT_TRUE(trans_agree(1, 1, 1, ta, tb, DType::F32, rng));
    EXPECT_TRUE(trans_agree(7, 1, 5, ta, tb, DType::F32, rng));
    EXPECT_TRUE(trans_agree(1, 9, 1, ta, tb, DType::F32, rng));
    EXPECT_TRUE(trans_agree(13, 11, 3, ta, tb, DType::F64, rng));
    for (int i = 0; i < 6; ++i) {
      const int64_t m = dim(rng), k = dim(rng), n = dim(rng);
      EXPECT_TRUE(trans_agree(m, k, n, ta, tb, DType::F32, rng))
          << "ta " << ta << " tb " << tb << " " << m << "x" << k << " @ " << k << "x" << n;
    }
  }
}

TEST(CudaMatmul, TransZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  struct Case {
    int64_t m, k, n;
    bool ta, tb;
  };
  const Case cases[] = {
      // MNIST: fc1 / fc2 forward (x @ W^T) and weight gradients (g^T @ x).
      {64, 9216, 128, false, true}, {64, 128, 10, false, true},
      {10, 64, 128, true, false}, {128, 64, 9216, true, false},
      // ResNet's fc.
      {128, 64, 10, false, true}, {10, 128, 64, true, false},
      // The transformer: qkv, proj, mlp, lm head forward; weight gradients.
      {2048, 128, 384, false, true}, {2048, 128, 128, false, true},
      {2048, 128, 512, false, true}, {2048, 512, 128, false, true},
      {2048, 128, 256, false, true}, {256, 2048, 128, true, false},
      {128, 2048, 512, true, false}, {512, 2048, 128, true, false},
      {128, 2048, 128, true, false}, {384, 2048, 128, true, false}};
  for (const Case& c : cases)
    EXPECT_TRUE(trans_agree(c.m, c.k, c.n, c.ta, c.tb, DType::F32, rng))
        << "ta " << c.ta << " tb " << c.tb << " " << c.m << "x" << c.k << " @ " << c.k << "x" << c.n;
}

TEST(CudaMatmul, AddmmBroadcastAndScales) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  const int64_t m = 9, k = 33, n = 14;
  const Shape selfs[] = {{n}, {1, n}, {m, 1}, {m, n}, {}, {1, 1}, {1}};
  const double scales[][2] = {{1, 1}, {0.5, 2}, {0, 1}, {-1.5, 0.25}};  // beta, alpha
  for (DType dt : {DType::F32, DType::F64})
    for (const Shape& s : selfs)
      for (const auto& sc : scales) {
        HostTensor self = random_tensor(dt, s, rng);
        HostTensor a = random_tensor(dt, {m, k}, rng);
        HostTensor b = random_tensor(dt, {k, n}, rng, -scale_for(k), scale_for(k));
        EXPECT_TRUE(cpu_gpu_agree("aten.addmm.default", {{"beta", sc[0]}, {"alpha", sc[1]}},
                                  {&self, &a, &b}, dt == DType::F64 ? kF64 : kF32))
            << ts::shape_str(s) << " beta " << sc[0] << " alpha " << sc[1];
      }
  // k = 0: beta * self alone.
  HostTensor self = random_tensor(DType::F32, {n}, rng);
  HostTensor a = random_tensor(DType::F32, {m, 0}, rng);
  HostTensor b = random_tensor(DType::F32, {0, n}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.addmm.default", {{"beta", 0.5}, {"alpha", 1}}, {&self, &a, &b}, kF32));
  EXPECT_TRUE(cpu_gpu_agree("aten.addmm.default", {{"beta", 0}, {"alpha", 1}}, {&self, &a, &b}, kF32));
}

// ---- convolution ----

struct ConvCase {
  int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G;
  bool bias;
  bool d1 = false;  // 1-D: H = KH = 1, attrs of one value
  int64_t OH() const { return (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1; }
  json pair(int64_t h, int64_t w) const { return d1 ? json{w} : json{h, w}; }
  json attrs() const {
    return {{"stride", pair(sh, sw)},  {"padding", pair(ph, pw)}, {"dilation", pair(dh, dw)},
            {"transposed", false},     {"output_padding", pair(0, 0)}, {"groups", G}};
  }
  json bwd_attrs(bool gi, bool gw, bool gb) const {
    json a = attrs();
    a["bias_sizes"] = bias ? json::array({O}) : json::array({0});
    a["output_mask"] = {gi, gw, gb};
    return a;
  }
  Shape x() const { return d1 ? Shape{N, C, W} : Shape{N, C, H, W}; }
  Shape w() const { return d1 ? Shape{O, C / G, KW} : Shape{O, C / G, KH, KW}; }
  Shape y() const { return d1 ? Shape{N, O, OW()} : Shape{N, O, OH(), OW()}; }
};

::testing::AssertionResult conv_fwd_agree(const ConvCase& c, DType dt, std::mt19937& rng) {
  const double r = scale_for(c.C / c.G * c.KH * c.KW);
  HostTensor x = random_tensor(dt, c.x(), rng);
  HostTensor w = random_tensor(dt, c.w(), rng, -r, r);
  HostTensor b = random_tensor(dt, {c.O}, rng);
  return cpu_gpu_agree("aten.convolution.default", c.attrs(), {&x, &w, c.bias ? &b : nullptr},
                       dt == DType::F64 ? kF64 : kF32);
}

// Every output whose mask bit is false is left unwritten by both kernels.
::testing::AssertionResult conv_bwd_agree(const ConvCase& c, bool gi, bool gw, bool gb, DType dt,
                                          std::mt19937& rng) {
  // grad_weight sums N*OH*OW products, grad_input O/G*KH*KW.
  const double r = scale_for(c.N * c.OH() * c.OW());
  HostTensor go = random_tensor(dt, c.y(), rng, -r, r);
  HostTensor x = random_tensor(dt, c.x(), rng);
  HostTensor w = random_tensor(dt, c.w(), rng);
  std::vector<int> skip;
  if (!gi) skip.push_back(0);
  if (!gw) skip.push_back(1);
  if (!gb) skip.push_back(2);
  return cpu_gpu_agree("aten.convolution_backward.default", c.bwd_attrs(gi, gw, gb), {&go, &x, &w},
                       dt == DType::F64 ? kF64 : kF32, skip);
}

// N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G, bias
const ConvCase kMnist[] = {{64, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},
                           {64, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1, true}};
const ConvCase kResnet[] = {
    {128, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // stem
    {128, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // layer1
    {128, 16, 28, 28, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},  // layer2.conv1
    {128, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // layer2.conv2
    {128, 16, 28, 28, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},  // layer2.short
    {128, 32, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, false},  // layer3.conv1
    {128, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // layer3.conv2
    {128, 32, 14, 14, 64, 1, 1, 2, 2, 0, 0, 1, 1, 1, false}}; // layer3.short

TEST(CudaConv, ForwardZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (const ConvCase& c : kMnist) EXPECT_TRUE(conv_fwd_agree(c, DType::F32, rng)) << c.C << "->" << c.O;
  for (const ConvCase& c : kResnet)
    EXPECT_TRUE(conv_fwd_agree(c, DType::F32, rng)) << c.C << "->" << c.O << " k" << c.KH << " s" << c.sh;
}

TEST(CudaConv, BackwardZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  // MNIST: conv2 wants all three, conv1 (the input's) no grad_input.
  EXPECT_TRUE(conv_bwd_agree(kMnist[1], true, true, true, DType::F32, rng));
  EXPECT_TRUE(conv_bwd_agree(kMnist[0], false, true, true, DType::F32, rng));
  // ResNet: no bias; the stem wants grad_weight only.
  EXPECT_TRUE(conv_bwd_agree(kResnet[0], false, true, false, DType::F32, rng));
  for (size_t i = 1; i < std::size(kResnet); ++i)
    EXPECT_TRUE(conv_bwd_agree(kResnet[i], true, true, false, DType::F32, rng)) << "resnet conv " << i;
}

TEST(CudaConv, RandomGeometry) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const ConvCase fixed[] = {
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},     // all ones
      {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},     // odd sizes
      {3, 4, 9, 11, 6, 3, 2, 2, 1, 0, 1, 1, 1, 2, true},    // groups 2, asymmetric stride/pad
      {2, 8, 10, 10, 8, 3, 3, 1, 1, 2, 2, 2, 2, 8, false},  // depthwise, dilation 2
      {2, 6, 13, 9, 9, 5, 3, 3, 2, 2, 1, 1, 2, 3, true},    // groups 3, mixed
      {1, 5, 6, 6, 7, 6, 6, 1, 1, 0, 0, 1, 1, 1, true},     // kernel = input
      {4, 2, 5, 17, 3, 1, 4, 1, 3, 0, 1, 1, 1, 1, false}};
  for (const ConvCase& c : fixed) {
    EXPECT_TRUE(conv_fwd_agree(c, DType::F32, rng)) << c.C << "->" << c.O << " g" << c.G;
    EXPECT_TRUE(conv_fwd_agree(c, DType::F64, rng)) << c.C << "->" << c.O << " g" << c.G;
    for (int m = 1; m < 8; ++m)
      EXPECT_TRUE(conv_bwd_agree(c, m & 1, m & 2, m & 4, DType::F32, rng))
          << c.C << "->" << c.O << " g" << c.G << " mask " << m;
    EXPECT_TRUE(conv_bwd_agree(c, true, true, true, DType::F64, rng));
  }
  std::uniform_int_distribution<int64_t> u(1, 4);
  for (int i = 0; i < 25; ++i) {
    ConvCase c{};
    c.G = u(rng) % 3 + 1;
    c.N = u(rng);
    c.C = c.G * u(rng);
    c.O = c.G * u(rng);
    c.KH = u(rng);
    c.KW = u(rng);
    c.sh = u(rng) % 3 + 1;
    c.sw = u(rng) % 3 + 1;
    c.dh = u(rng) % 2 + 1;
    c.dw = u(rng) % 2 + 1;
    c.ph = (u(rng) - 1) % (c.dh * (c.KH - 1) + 1);  // at most the kernel's reach, as in models
    c.pw = (u(rng) - 1) % (c.dw * (c.KW - 1) + 1);
    c.H = c.dh * (c.KH - 1) + u(rng) * 3;
    c.W = c.dw * (c.KW - 1) + u(rng) * 3;
    c.bias = u(rng) % 2;
    EXPECT_TRUE(conv_fwd_agree(c, DType::F32, rng)) << "case " << i;
    EXPECT_TRUE(conv_bwd_agree(c, true, true, c.bias, DType::F32, rng)) << "case " << i;
  }
}

TEST(CudaConv, OneD) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  // N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G, bias, 1-D
  const ConvCase cases[] = {{2, 3, 1, 17, 5, 1, 3, 1, 2, 0, 1, 1, 1, 1, true, true},
                            {3, 4, 1, 9, 6, 1, 2, 1, 1, 0, 0, 1, 2, 2, false, true},
                            {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true}};
  for (const ConvCase& c : cases) {
    EXPECT_TRUE(conv_fwd_agree(c, DType::F32, rng));
    EXPECT_TRUE(conv_fwd_agree(c, DType::F64, rng));
    EXPECT_TRUE(conv_bwd_agree(c, true, true, true, DType::F32, rng));
    // grad_weight not requested: its declared type is a 4-d view, unwritten.
    EXPECT_TRUE(conv_bwd_agree(c, true, false, c.bias, DType::F32, rng));
  }
}

TEST(CudaConv, TransposedIsRefused) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(15);
  json a = {{"stride", {2, 2}}, {"padding", {0, 0}}, {"dilation", {1, 1}},
            {"transposed", true}, {"output_padding", {0, 0}}, {"groups", 1}};
  HostTensor x = random_tensor(DType::F32, {1, 2, 4, 4}, rng);
  HostTensor w = random_tensor(DType::F32, {2, 3, 2, 2}, rng);  // (C_in, C_out, k, k)
  EXPECT_THROW(cpu_gpu_agree("aten.convolution.default", a, {&x, &w, nullptr}), ts::Error);
}

// ---- under CUDA graph capture, as the step runs them ----

// Builds the node's CUDA kernel, runs it once (warm-up, as library kernels
// may load lazily), captures one run into a graph and replays it; the
// replay's outputs must match the CPU kernel's.
::testing::AssertionResult captured_agree(const std::string& op, const json& attrs,
                                          const std::vector<const HostTensor*>& inputs,
                                          Tolerance tol, std::vector<int> skip = {}) {
  namespace cu = ts::cuda;
  const ts::OpDef* def = ts::OpRegistry::get().find(op);
  std::vector<ts::TensorType> types;
  std::vector<bool> present;
  for (const HostTensor* t : inputs) {
    types.push_back(t ? t->view.type() : ts::TensorType{});
    present.push_back(t != nullptr);
  }
  ts::NodeCtx node("n0", op, attrs, types, present);
  std::vector<ts::TensorType> out_types = def->infer(node);
  ts::KernelCtx kc{node, out_types, 1};
  std::vector<HostTensor> want;
  std::vector<ts::Tensor> cin, cout;
  for (const HostTensor* t : inputs) cin.push_back(t ? t->view : ts::Tensor{});
  for (const ts::TensorType& t : out_types) want.emplace_back(t.dtype, t.shape);
  for (auto& w : want) cout.push_back(w.view);
  def->make(kc)->run(cin.data(), cout.data());

  const cu::Ctx& ctx = ts_cuda_test::test_ctx();
  cu::Build b{kc, ctx.dnn, ctx.blas};
  std::unique_ptr<cu::Kernel> k = (*cu::KernelTable::get().find(op))(b);
  std::vector<void*> bufs;
  auto device = [&](const ts::TensorType& t, const void* host) {
    ts::Tensor d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    cu::check(cudaMalloc(&d.data, std::max<size_t>(t.nbytes(), 1)), "alloc");
    bufs.push_back(d.data);
    if (host) cu::check(cudaMemcpy(d.data, host, t.nbytes(), cudaMemcpyHostToDevice), "H2D");
    return d;
  };
  std::vector<ts::Tensor> din, dout;
  for (const HostTensor* t : inputs) din.push_back(t ? device(t->view.type(), t->view.data) : ts::Tensor{});
  for (const ts::TensorType& t : out_types) dout.push_back(device(t, nullptr));
  k->run(din.data(), dout.data(), ctx);
  cu::check(cudaStreamSynchronize(ctx.stream), "warm-up");
  for (const ts::Tensor& d : dout) cu::check(cudaMemset(d.data, 0xff, d.nbytes()), "poison");
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cu::check(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal), "capture");
  k->run(din.data(), dout.data(), ctx);
  cu::check(cudaStreamEndCapture(ctx.stream, &graph), "end capture");
  cu::check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cu::check(cudaGraphLaunch(exec, ctx.stream), "launch");
  cu::check(cudaStreamSynchronize(ctx.stream), "replay");
  std::vector<HostTensor> got;
  for (const ts::Tensor& d : dout) {
    got.emplace_back(d.dtype, d.shape);
    cu::check(cudaMemcpy(got.back().view.data, d.data, d.nbytes(), cudaMemcpyDeviceToHost), "D2H");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* p : bufs) cudaFree(p);
  for (size_t j = 0; j < got.size(); ++j) {
    if (std::find(skip.begin(), skip.end(), int(j)) != skip.end()) continue;
    const float* g = got[j].view.as<float>();
    const float* e = want[j].view.as<float>();
    for (int64_t i = 0; i < got[j].view.numel(); ++i)
      if (!(std::fabs(g[i] - e[i]) <= tol.atol + tol.rtol * std::fabs(e[i])))
        return ::testing::AssertionFailure()
               << op << " output " << j << " element " << i << ": gpu " << g[i] << ", cpu " << e[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaMatmulConv, UnderGraphCapture) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  HostTensor a = random_tensor(DType::F32, {2048, 128}, rng);
  HostTensor w = random_tensor(DType::F32, {384, 128}, rng, -0.3, 0.3);
  EXPECT_TRUE(captured_agree("trainstep.matmul", {{"trans_a", false}, {"trans_b", true}}, {&a, &w}, kF32));
  HostTensor q = random_tensor(DType::F32, {128, 64, 32}, rng);
  HostTensor kt = random_tensor(DType::F32, {128, 32, 64}, rng, -0.5, 0.5);
  EXPECT_TRUE(captured_agree("aten.bmm.default", json::object(), {&q, &kt}, kF32));
  HostTensor self = random_tensor(DType::F32, {1, 64}, rng);
  HostTensor m1 = random_tensor(DType::F32, {16, 32}, rng);
  HostTensor m2 = random_tensor(DType::F32, {32, 64}, rng, -0.5, 0.5);
  EXPECT_TRUE(captured_agree("aten.addmm.default", {{"beta", 0.5}, {"alpha", 2}}, {&self, &m1, &m2}, kF32));

  const ConvCase& c = kMnist[1];
  HostTensor x = random_tensor(DType::F32, c.x(), rng);
  HostTensor cw = random_tensor(DType::F32, c.w(), rng, -0.2, 0.2);
  HostTensor cb = random_tensor(DType::F32, {c.O}, rng);
  EXPECT_TRUE(captured_agree("aten.convolution.default", c.attrs(), {&x, &cw, &cb}, kF32));
  const double r = scale_for(c.N * c.OH() * c.OW());
  HostTensor go = random_tensor(DType::F32, c.y(), rng, -r, r);
  EXPECT_TRUE(captured_agree("aten.convolution_backward.default", c.bwd_attrs(true, true, true),
                             {&go, &x, &cw}, kF32));
}

}  // namespace

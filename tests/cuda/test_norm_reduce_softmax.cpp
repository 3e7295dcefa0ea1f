// CUDA batch norm, layer norm, reductions and softmax against the CPU
// kernels, on the zoo's shapes (ResNet's batch norms, the transformer's
// layer norms and masked attention softmax, the classifiers' log_softmax and
// loss reductions) and on random and edge-case shapes.
#include <limits>

#include "cuda_op_test.h"

using namespace ts_cuda_test;
using ts::DType;
using ts::HostTensor;
using ts::Shape;

namespace {

const char* kBn = "aten.native_batch_norm.default";
const char* kBnBwd = "aten.native_batch_norm_backward.default";
const char* kLn = "aten.native_layer_norm.default";
const char* kLnBwd = "aten.native_layer_norm_backward.default";

HostTensor rnd(const Shape& s, std::mt19937& rng, double lo = -1, double hi = 1,
               DType dt = DType::F32) {
  return random_tensor(dt, s, rng, lo, hi);
}

// A random shape of `rank` dims, each in [1, hi].
Shape random_shape(std::mt19937& rng, int rank, int64_t hi) {
  Shape s;
  for (int d = 0; d < rank; ++d) s.push_back(1 + int64_t(rng() % hi));
  return s;
}

void set_f(HostTensor& t, int64_t i, double v) {
  if (t.view.dtype == DType::F64) t.view.as<double>()[i] = v;
  else t.view.as<float>()[i] = float(v);
}

// ---- batch norm ---------------------------------------------------------------

json bn_attrs(bool training) {
  return {{"training", training}, {"momentum", training ? 0.0 : 0.1}, {"eps", 1e-5}};
}

// Forward (training), then backward from the forward's saves.
void check_bn_train(const Shape& s, bool affine, std::mt19937& rng, double lo = -1,
                    double hi = 1, DType dt = DType::F32) {
  SCOPED_TRACE((ts::TensorType{dt, s}.str()) + (affine ? " affine" : ""));
  const Shape c{s[1]};
  HostTensor x = rnd(s, rng, lo, hi, dt), w = rnd(c, rng, 0.5, 1.5, dt), b = rnd(c, rng, -1, 1, dt);
  const HostTensor* wp = affine ? &w : nullptr;
  const HostTensor* bp = affine ? &b : nullptr;
  EXPECT_TRUE(cpu_gpu_agree(kBn, bn_attrs(true), {&x, wp, bp, nullptr, nullptr}));

  auto fwd = ts_test::run_op(kBn, bn_attrs(true), {&x, wp, bp, nullptr, nullptr});
  HostTensor dy = rnd(s, rng, -1, 1, dt);
  const json battrs = {{"train", true}, {"eps", 1e-5}, {"output_mask", {true, true, true}}};
  EXPECT_TRUE(cpu_gpu_agree(kBnBwd, battrs, {&dy, &x, wp, nullptr, nullptr, &fwd[1], &fwd[2]}));
}

void check_bn_eval(const Shape& s, bool affine, std::mt19937& rng, DType dt = DType::F32) {
  SCOPED_TRACE((ts::TensorType{dt, s}.str()) + (affine ? " affine" : "") + " eval");
  const Shape c{s[1]};
  HostTensor x = rnd(s, rng, -2, 2, dt), w = rnd(c, rng, 0.5, 1.5, dt), b = rnd(c, rng, -1, 1, dt);
  HostTensor rm = rnd(c, rng, -0.5, 0.5, dt), rv = rnd(c, rng, 0.5, 1.5, dt);
  const HostTensor* wp = affine ? &w : nullptr;
  const HostTensor* bp = affine ? &b : nullptr;
  EXPECT_TRUE(cpu_gpu_agree(kBn, bn_attrs(false), {&x, wp, bp, &rm, &rv}));
  HostTensor dy = rnd(s, rng, -1, 1, dt);
  const json battrs = {{"train", false}, {"eps", 1e-5}, {"output_mask", {true, true, true}}};
  HostTensor empty(dt, Shape{0});
  EXPECT_TRUE(cpu_gpu_agree(kBnBwd, battrs, {&dy, &x, wp, &rm, &rv, &empty, &empty}));
}

TEST(CudaBatchNorm, ResNetShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (const Shape& s : {Shape{128, 16, 28, 28}, Shape{128, 32, 14, 14}, Shape{128, 64, 7, 7}}) {
    check_bn_train(s, true, rng);
    check_bn_eval(s, true, rng);
  }
}

TEST(CudaBatchNorm, RandomShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (int it = 0; it < 12; ++it) {
    const int rank = 2 + int(rng() % 3);
    Shape s = random_shape(rng, rank, 9);
    if (s[0] * (rank > 2 ? s[2] : 1) < 2) s[0] = 2;  // training needs 2 values per channel
    check_bn_train(s, it % 2 == 0, rng);
    check_bn_eval(s, it % 3 != 0, rng);
  }
  // Rank 2 (BatchNorm1d), odd sizes, a long channel, size-1 dims.
  check_bn_train({5, 3}, true, rng);
  check_bn_train({2, 1, 1}, true, rng);
  check_bn_train({3, 7, 1, 1}, false, rng);
  check_bn_train({1, 4, 1, 70001}, true, rng);
  check_bn_train({33, 5, 17, 3}, true, rng);
  check_bn_eval({1, 1}, false, rng);
}

TEST(CudaBatchNorm, LargeMeanAndFloat64) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  // |mean| >> std: the shifted sums keep the variance accurate. (A larger
  // offset would make y = x * alpha + beta cancel at a magnitude where one
  // float rounding of x * alpha, FMA or not, exceeds the tolerance.)
  check_bn_train({16, 8, 10, 10}, true, rng, 10, 11);
  check_bn_train({8, 6, 5, 5}, true, rng, -1, 1, DType::F64);
  check_bn_eval({8, 6, 5}, true, rng, DType::F64);
}

// ---- layer norm ---------------------------------------------------------------

void check_ln(const Shape& s, int k, bool affine, std::mt19937& rng, DType dt = DType::F32) {
  SCOPED_TRACE((ts::TensorType{dt, s}.str()) + " normalized dims " + std::to_string(k));
  const Shape ns(s.end() - k, s.end());
  HostTensor x = rnd(s, rng, -2, 2, dt), w = rnd(ns, rng, 0.5, 1.5, dt), b = rnd(ns, rng, -1, 1, dt);
  const HostTensor* wp = affine ? &w : nullptr;
  const HostTensor* bp = affine ? &b : nullptr;
  const json attrs = {{"normalized_shape", ns}, {"eps", 1e-5}};
  EXPECT_TRUE(cpu_gpu_agree(kLn, attrs, {&x, wp, bp}));

  auto fwd = ts_test::run_op(kLn, attrs, {&x, wp, bp});
  HostTensor dy = rnd(s, rng, -1, 1, dt);
  const json battrs = {{"normalized_shape", ns}, {"output_mask", {true, true, true}}};
  EXPECT_TRUE(cpu_gpu_agree(kLnBwd, battrs, {&dy, &x, &fwd[1], &fwd[2], wp, bp}));
}

TEST(CudaLayerNorm, TransformerShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  check_ln({32, 64, 128}, 1, true, rng);
  check_ln({32, 64, 128}, 1, false, rng);
}

TEST(CudaLayerNorm, RandomShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (int it = 0; it < 10; ++it) {
    const int rank = 1 + int(rng() % 3);
    const Shape s = random_shape(rng, rank, 40);
    check_ln(s, 1 + int(rng() % rank), it % 2 == 0, rng);
  }
  check_ln({4, 1}, 1, true, rng);       // one element per row: var 0
  check_ln({3, 5, 7}, 2, true, rng);    // two normalized dims
  check_ln({3, 5000}, 1, true, rng);    // rows longer than a block
  check_ln({5000, 3}, 1, true, rng);    // many short rows, many row groups
  check_ln({7, 37}, 1, true, rng, DType::F64);
}

// ---- reductions ---------------------------------------------------------------

json red_attrs(std::vector<int64_t> dims, bool keepdim) {
  return {{"dim", dims}, {"keepdim", keepdim}, {"dtype", nullptr}};
}

TEST(CudaReduce, ZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  // Bias gradients: sum over the batch, keepdim.
  HostTensor g = rnd({2048, 128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0}, true), {&g}));
  HostTensor g2 = rnd({128, 10}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0}, true), {&g2}));
  // Sums of log_softmax rows and losses.
  HostTensor l = rnd({64, 10}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({1}, false), {&l}));
  HostTensor l3 = rnd({64, 1, 10}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({2}, false), {&l3}));
  // Global average pooling: mean over H, W, keepdim.
  HostTensor a = rnd({128, 64, 7, 7}, rng, 0, 2);
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({-1, -2}, true), {&a}));
  HostTensor n = rnd({128, 10}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({1}, false), {&n}));
  // Loss: mean / sum of everything; count of a bool mask (-> int64, exact).
  HostTensor v = rnd({128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.default", {{"dtype", nullptr}}, {&v}));
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&v}));
  HostTensor m = rnd({128}, rng, 0, 1, DType::Bool);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&m}));
  HostTensor m2 = rnd({2048}, rng, 0, 1, DType::Bool);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&m2}));
}

TEST(CudaReduce, RandomShapesAndDims) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (int it = 0; it < 40; ++it) {
    const int rank = 1 + int(rng() % 5);
    const Shape s = random_shape(rng, rank, 9);
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d)
      if (rng() % 2) dims.push_back(rng() % 2 ? d : d - rank);
    const bool keep = rng() % 2;
    SCOPED_TRACE((ts::TensorType{DType::F32, s}.str()) + " dims " + json(dims).dump());
    HostTensor x = rnd(s, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs(dims, keep), {&x}));
    EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs(dims, keep), {&x}));
    EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs(dims, keep), {&x}));
    EXPECT_TRUE(cpu_gpu_agree("aten.amin.default", red_attrs(dims, keep), {&x}));
    HostTensor xi = rnd(s, rng, -100, 100, DType::I64);
    EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs(dims, keep), {&xi}));
    EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs(dims, keep), {&xi}));
    HostTensor xb = rnd(s, rng, 0, 1, DType::Bool);
    EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs(dims, keep), {&xb}));
    EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs(dims, keep), {&xb}));
    HostTensor xd = rnd(s, rng, -1, 1, DType::F64);
    EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs(dims, keep), {&xd}));
    if (!s.empty()) {
      const int64_t d = int64_t(rng() % rank);
      EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", d}, {"keepdim", keep}}, {&x}));
      EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", d}, {"keepdim", keep}}, {&xi}));
    }
  }
}

TEST(CudaReduce, LongReductionsSplit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  // Few outputs, long reductions: the chunked passes and their merge.
  HostTensor big = rnd({1000003}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&big}));
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.default", {{"dtype", nullptr}}, {&big}));
  EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs({}, false), {&big}));
  HostTensor rows = rnd({3, 200001}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({1}, true), {&rows}));
  HostTensor cols = rnd({100001, 3}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0}, false), {&cols}));
  EXPECT_TRUE(cpu_gpu_agree("aten.amin.default", red_attrs({0}, false), {&cols}));
  HostTensor mid = rnd({2, 50001, 5}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({1}, false), {&mid}));
  HostTensor ints = rnd({500001}, rng, -1000, 1000, DType::I64);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&ints}));
  HostTensor b = rnd({300001}, rng, 0, 1, DType::Bool);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&b}));
  HostTensor i32 = rnd({70001, 2}, rng, -1000, 1000, DType::I32);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0}, false), {&i32}));
  EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs({0}, false), {&i32}));
}

TEST(CudaReduce, EdgeCases) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  // NaN propagates through amax/amin and sums; argmax takes the first NaN.
  HostTensor x = rnd({6, 9}, rng);
  set_f(x, 13, std::nan(""));
  set_f(x, 40, std::nan(""));
  for (const char* op : {"aten.amax.default", "aten.amin.default", "aten.sum.dim_IntList"}) {
    EXPECT_TRUE(cpu_gpu_agree(op, red_attrs({1}, false), {&x}));
    EXPECT_TRUE(cpu_gpu_agree(op, red_attrs({0}, false), {&x}));
  }
  EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", 1}, {"keepdim", false}}, {&x}));
  EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", nullptr}, {"keepdim", false}}, {&x}));
  // Ties: the first maximum.
  HostTensor t = rnd({4, 5}, rng, 0, 3, DType::I64);
  EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", 1}, {"keepdim", true}}, {&t}));
  EXPECT_TRUE(cpu_gpu_agree("aten.argmax.default", {{"dim", 0}, {"keepdim", false}}, {&t}));
  // Empty input: sum 0, mean NaN; empty output: nothing to do.
  HostTensor e = rnd({0, 3}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0}, false), {&e}));
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({0}, true), {&e}));
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({1}, false), {&e}));
  // 0-d and all-size-1 inputs.
  HostTensor s0 = rnd({}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.default", {{"dtype", nullptr}}, {&s0}));
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({0}, true), {&s0}));
  HostTensor ones = rnd({1, 1, 1}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({1}, false), {&ones}));
  // dtype attr: float input summed into float64, int input averaged into float32.
  HostTensor f = rnd({7, 11}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList",
                            {{"dim", {1}}, {"keepdim", false}, {"dtype", "float64"}}, {&f}));
  HostTensor i = rnd({7, 11}, rng, -50, 50, DType::I64);
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim",
                            {{"dim", {0}}, {"keepdim", false}, {"dtype", "float32"}}, {&i}));
  // General form: two separate reduced groups.
  HostTensor g = rnd({4, 5, 6, 7}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.sum.dim_IntList", red_attrs({0, 2}, false), {&g}));
  EXPECT_TRUE(cpu_gpu_agree("aten.mean.dim", red_attrs({1, 3}, true), {&g}));
  EXPECT_TRUE(cpu_gpu_agree("aten.amax.default", red_attrs({0, 3}, false), {&g}));
}

TEST(CudaReduce, RefusesIntOutputs) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(10);
  HostTensor x = rnd({3, 4}, rng, -5, 5, DType::I32);
  // The CPU sums into int32 via int64; the CUDA factory refuses the node.
  EXPECT_THROW(cpu_gpu_agree("aten.sum.dim_IntList",
                             {{"dim", {0}}, {"keepdim", false}, {"dtype", "int32"}}, {&x}),
               ts::Error);
}

// ---- softmax ------------------------------------------------------------------

void check_softmax(const HostTensor& x, int64_t dim) {
  SCOPED_TRACE(x.view.type().str() + " dim " + std::to_string(dim));
  std::mt19937 rng(uint32_t(x.view.numel() + dim + 100));
  const json attrs = {{"dim", dim}, {"half_to_float", false}};
  HostTensor g = rnd(x.view.shape, rng, -1, 1, x.view.dtype);
  const json battrs = {{"dim", dim}, {"input_dtype", ts::dtype_name(x.view.dtype)}};
  for (bool log : {false, true}) {
    const char* op = log ? "aten._log_softmax.default" : "aten._softmax.default";
    const char* bop =
        log ? "aten._log_softmax_backward_data.default" : "aten._softmax_backward_data.default";
    EXPECT_TRUE(cpu_gpu_agree(op, attrs, {&x})) << op;
    auto y = ts_test::run_op(op, attrs, {&x});
    EXPECT_TRUE(cpu_gpu_agree(bop, battrs, {&g, &y[0]})) << bop;
  }
}

TEST(CudaSoftmax, ZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  // Causal attention scores: -inf above the diagonal.
  HostTensor s = rnd({32, 4, 64, 64}, rng, -4, 4);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < 32 * 4 * 64; ++r)
    for (int64_t j = r % 64 + 1; j < 64; ++j) s.view.as<float>()[r * 64 + j] = -inf;
  check_softmax(s, -1);
  check_softmax(rnd({2048, 256}, rng, -5, 5), 1);
  check_softmax(rnd({64, 10}, rng, -5, 5), 1);
  check_softmax(rnd({128, 10}, rng, -5, 5), 1);
  check_softmax(rnd({64, 1, 10}, rng, -5, 5), 2);
}

TEST(CudaSoftmax, RandomShapesAndDims) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for (int it = 0; it < 16; ++it) {
    const int rank = 1 + int(rng() % 4);
    const Shape s = random_shape(rng, rank, 12);
    const int64_t dim = int64_t(rng() % rank) - (rng() % 2 ? rank : 0);
    check_softmax(rnd(s, rng, -3, 3), dim);
  }
  check_softmax(rnd({3, 5000}, rng, -10, 10), 1);   // long rows
  check_softmax(rnd({3, 5000, 2}, rng, -10, 10), 1);  // long strided lines
  check_softmax(rnd({7, 1}, rng), 1);                // one element per line
  check_softmax(rnd({1, 1, 9}, rng), 0);             // R = 1, strided
  check_softmax(rnd({9, 33}, rng, -1, 1, DType::F64), 1);
  check_softmax(rnd({4, 6, 5}, rng, -1, 1, DType::F64), 1);
  check_softmax(rnd({}, rng), 0);  // 0-d
}

TEST(CudaSoftmax, NaNAndMaskedLines) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const float inf = std::numeric_limits<float>::infinity();
  HostTensor x = rnd({6, 40}, rng, -3, 3);
  x.view.as<float>()[45] = std::nanf("");  // row 1 becomes NaN
  for (int j = 0; j < 40; ++j) x.view.as<float>()[3 * 40 + j] = -inf;  // row 3 all masked: NaN
  x.view.as<float>()[5 * 40 + 7] = inf;  // row 5: inf - inf = NaN at 7
  check_softmax(x, 1);
  HostTensor xt = rnd({40, 6}, rng, -3, 3);
  xt.view.as<float>()[45] = std::nanf("");
  for (int j = 0; j < 40; ++j) xt.view.as<float>()[j * 6 + 3] = -inf;
  check_softmax(xt, 0);
}

}  // namespace

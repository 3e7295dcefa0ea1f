// CUDA kernels of the pooling family (max, average, adaptive; forward and
// backward) and of the Philox random ops, against the CPU kernels. Max-pool
// indices and random bits must agree exactly; pooled values and gradients
// to 1e-5. The random ops are also run from a captured CUDA graph replayed
// with new seed/offset values in device memory, as the step runs them.
#include <cstring>
#include <limits>
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

const char* kMax = "aten.max_pool2d_with_indices.default";
const char* kMaxBwd = "aten.max_pool2d_with_indices_backward.default";
const char* kAvg = "aten.avg_pool2d.default";
const char* kAvgBwd = "aten.avg_pool2d_backward.default";
const char* kAdaAvg = "aten._adaptive_avg_pool2d.default";
const char* kAdaAvgBwd = "aten._adaptive_avg_pool2d_backward.default";
const char* kAdaMax = "aten.adaptive_max_pool2d.default";
const char* kAdaMaxBwd = "aten.adaptive_max_pool2d_backward.default";
const char* kUniform = "trainstep.philox_uniform.default";
const char* kNormal = "trainstep.philox_normal.default";

const Tolerance kExact{0, 0};

json max_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
               std::vector<int64_t> d, bool ceil_mode) {
  return {{"kernel_size", k}, {"stride", s}, {"padding", p}, {"dilation", d}, {"ceil_mode", ceil_mode}};
}

json avg_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p, bool ceil_mode,
               bool include_pad, json divisor) {
  return {{"kernel_size", k}, {"stride", s},          {"padding", p}, {"ceil_mode", ceil_mode},
          {"count_include_pad", include_pad}, {"divisor_override", divisor}};
}

// True when the CPU op accepts these attrs for this input.
bool accepts(const std::string& op, const json& attrs, const std::vector<ts::TensorType>& in) {
  return ts_test::infer_error(op, attrs, in).empty();
}

HostTensor i64_scalar(int64_t v) {
  HostTensor t(DType::I64, Shape{});
  t.view.as<int64_t>()[0] = v;
  return t;
}

// Sets some elements of a float tensor to NaN, +inf and -inf.
void add_specials(HostTensor& x, std::mt19937& rng) {
  const int64_t n = x.view.numel();
  const float special[3] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int64_t i = 0; i < n / 7 + 1; ++i) x.view.as<float>()[rng() % n] = special[rng() % 3];
}

// Max-pool forward (values and indices exact), then the backward with the
// CPU's indices (when they are all inside the plane: the CPU fails else).
void check_max_pool(const HostTensor& x, const json& attrs, std::mt19937& rng) {
  SCOPED_TRACE(x.view.type().str() + " " + attrs.dump());
  EXPECT_TRUE(cpu_gpu_agree(kMax, attrs, {&x}, kExact));
  std::vector<ts::TensorType> types;
  auto fwd = ts_test::run_op(kMax, attrs, {&x}, &types);
  const int64_t plane = x.view.shape[x.view.rank() - 1] * x.view.shape[x.view.rank() - 2];
  const int64_t* idx = fwd[1].view.as<int64_t>();
  for (int64_t i = 0; i < fwd[1].view.numel(); ++i)
    if (idx[i] < 0 || idx[i] >= plane) return;
  HostTensor go = random_tensor(x.view.dtype, types[0].shape, rng);
  EXPECT_TRUE(cpu_gpu_agree(kMaxBwd, attrs, {&go, &x, &fwd[1]}));
}

void check_avg_pool(const HostTensor& x, const json& attrs, std::mt19937& rng) {
  SCOPED_TRACE(x.view.type().str() + " " + attrs.dump());
  EXPECT_TRUE(cpu_gpu_agree(kAvg, attrs, {&x}));
  std::vector<ts::TensorType> types;
  ts_test::run_op(kAvg, attrs, {&x}, &types);
  HostTensor go = random_tensor(x.view.dtype, types[0].shape, rng);
  EXPECT_TRUE(cpu_gpu_agree(kAvgBwd, attrs, {&go, &x}));
}

void check_adaptive(const HostTensor& x, int64_t oh, int64_t ow, std::mt19937& rng) {
  const json attrs = {{"output_size", {oh, ow}}};
  SCOPED_TRACE(x.view.type().str() + " " + attrs.dump());
  EXPECT_TRUE(cpu_gpu_agree(kAdaAvg, attrs, {&x}));
  EXPECT_TRUE(cpu_gpu_agree(kAdaMax, attrs, {&x}, kExact));
  if (oh == 0 || ow == 0) return;  // the backward ops refuse an empty output
  std::vector<ts::TensorType> types;
  auto fwd = ts_test::run_op(kAdaMax, attrs, {&x}, &types);
  HostTensor go = random_tensor(x.view.dtype, types[0].shape, rng);
  EXPECT_TRUE(cpu_gpu_agree(kAdaAvgBwd, json::object(), {&go, &x}));
  EXPECT_TRUE(cpu_gpu_agree(kAdaMaxBwd, json::object(), {&go, &x, &fwd[1]}));
}

// ---------------------------------------------------------------- max pool

TEST(CudaPool, MaxPoolZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  // MNIST: relu output [64, 64, 24, 24], 2x2 windows, stride [] (= kernel).
  HostTensor x = random_tensor(DType::F32, {64, 64, 24, 24}, rng);
  check_max_pool(x, max_attrs({2, 2}, {}, {0, 0}, {1, 1}, false), rng);
  // The same after a relu: many exact zeros, so ties.
  for (int64_t i = 0; i < x.view.numel(); ++i) x.view.as<float>()[i] = std::max(0.f, x.view.as<float>()[i]);
  check_max_pool(x, max_attrs({2, 2}, {}, {0, 0}, {1, 1}, false), rng);
}

TEST(CudaPool, MaxPoolRandomGeometries) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  int checked = 0;
  for (int it = 0; it < 80; ++it) {
    auto r = [&](int lo, int hi) { return int64_t(lo + rng() % (hi - lo + 1)); };
    const int64_t kh = r(1, 4), kw = r(1, 4);
    std::vector<int64_t> stride;
    if (rng() % 4) stride = std::vector<int64_t>{r(1, 3), r(1, 3)};
    const std::vector<int64_t> pad = {r(0, kh / 2), r(0, kw / 2)};
    const std::vector<int64_t> dil = {r(1, 2), r(1, 2)};
    const int64_t n = r(1, 3), c = r(1, 4), h = r(1, 13), w = r(1, 13);
    const Shape s = rng() % 4 == 0 ? Shape{c, h, w} : Shape{n, c, h, w};  // unbatched or not
    const DType dt = rng() % 5 == 0 ? DType::F64 : DType::F32;
    const json a = max_attrs({kh, kw}, stride, pad, dil, rng() % 2);
    if (!accepts(kMax, a, {{dt, s}})) continue;
    HostTensor x = random_tensor(dt, s, rng);
    check_max_pool(x, a, rng);
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(CudaPool, MaxPoolTiesAndSpecials) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  const json geoms[] = {max_attrs({2, 2}, {2, 2}, {0, 0}, {1, 1}, false),
                        max_attrs({3, 3}, {1, 1}, {1, 1}, {1, 1}, false),  // overlapping windows
                        max_attrs({3, 3}, {2, 2}, {1, 1}, {1, 1}, true),
                        max_attrs({3, 2}, {2, 1}, {1, 1}, {2, 1}, false),  // dilation
                        max_attrs({1, 1}, {1, 1}, {0, 0}, {1, 1}, false)};
  for (const json& a : geoms) {
    // Integer values 0..2: ties everywhere; the first maximum must win.
    HostTensor x = random_tensor(DType::F32, {2, 3, 9, 11}, rng, 0, 3);
    for (int64_t i = 0; i < x.view.numel(); ++i) x.view.as<float>()[i] = std::floor(x.view.as<float>()[i]);
    check_max_pool(x, a, rng);
    // NaN (any NaN is the max, the last one wins) and infinities.
    add_specials(x, rng);
    check_max_pool(x, a, rng);
    // A plane of -inf only: the window's first element.
    HostTensor m(DType::F32, {1, 1, 5, 6});
    for (int64_t i = 0; i < 30; ++i) m.view.as<float>()[i] = -std::numeric_limits<float>::infinity();
    check_max_pool(m, a, rng);
  }
}

TEST(CudaPool, MaxPoolEdgeShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  check_max_pool(random_tensor(DType::F32, {1, 1, 1, 1}, rng), max_attrs({1, 1}, {}, {0, 0}, {1, 1}, false), rng);
  check_max_pool(random_tensor(DType::F32, {3, 1, 7, 1}, rng), max_attrs({2, 1}, {2, 1}, {1, 0}, {1, 1}, true), rng);
  check_max_pool(random_tensor(DType::F32, {0, 2, 4, 4}, rng), max_attrs({2, 2}, {}, {0, 0}, {1, 1}, false), rng);
  check_max_pool(random_tensor(DType::F32, {5, 17, 33}, rng), max_attrs({3, 3}, {2, 2}, {1, 1}, {1, 1}, true), rng);
  check_max_pool(random_tensor(DType::F64, {2, 4, 13, 9}, rng), max_attrs({2, 2}, {}, {0, 0}, {1, 1}, false), rng);
}

// ---------------------------------------------------------------- average

TEST(CudaPool, AvgPoolCases) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  struct C {
    Shape x;
    json a;
  };
  const C cases[] = {
      {{2, 3, 8, 8}, avg_attrs({2, 2}, {2, 2}, {0, 0}, false, true, nullptr)},
      {{1, 2, 9, 7}, avg_attrs({3, 3}, {2, 2}, {1, 1}, false, true, nullptr)},
      {{1, 2, 9, 7}, avg_attrs({3, 3}, {2, 2}, {1, 1}, false, false, nullptr)},
      {{1, 2, 9, 7}, avg_attrs({3, 2}, {2, 1}, {1, 0}, true, true, nullptr)},
      {{1, 2, 10, 7}, avg_attrs({3, 2}, {2, 3}, {1, 1}, true, false, nullptr)},
      {{2, 2, 10, 10}, avg_attrs({3, 3}, {}, {1, 1}, false, true, 4)},
      {{1, 1, 6, 5}, avg_attrs({2, 3}, {1, 1}, {1, 1}, false, true, -3)},
      {{3, 7, 7}, avg_attrs({2, 2}, {2, 2}, {0, 0}, true, true, nullptr)},
      {{1, 2, 5, 5}, avg_attrs({5, 5}, {1, 1}, {2, 2}, false, false, nullptr)},
      {{1, 1, 1, 1}, avg_attrs({1, 1}, {1, 1}, {0, 0}, false, true, nullptr)},
      {{0, 2, 5, 5}, avg_attrs({2, 2}, {2, 2}, {0, 0}, false, true, nullptr)},
      {{8, 16, 24, 24}, avg_attrs({3, 3}, {2, 2}, {1, 1}, true, false, nullptr)},
  };
  for (DType dt : {DType::F32, DType::F64})
    for (const C& c : cases) check_avg_pool(random_tensor(dt, c.x, rng), c.a, rng);
}

TEST(CudaPool, AvgPoolRandomGeometries) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  int checked = 0;
  for (int it = 0; it < 60; ++it) {
    auto r = [&](int lo, int hi) { return int64_t(lo + rng() % (hi - lo + 1)); };
    const int64_t kh = r(1, 5), kw = r(1, 5);
    std::vector<int64_t> stride;
    if (rng() % 4) stride = std::vector<int64_t>{r(1, 3), r(1, 3)};
    json div = nullptr;
    if (rng() % 5 == 0) div = r(1, 7);
    const json a = avg_attrs({kh, kw}, stride, {r(0, kh / 2), r(0, kw / 2)}, rng() % 2, rng() % 2, div);
    const Shape s = {r(1, 3), r(1, 4), r(1, 15), r(1, 15)};
    if (!accepts(kAvg, a, {{DType::F32, s}})) continue;
    check_avg_pool(random_tensor(DType::F32, s, rng), a, rng);
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

TEST(CudaPool, AdaptiveCases) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  struct C {
    Shape x;
    int64_t oh, ow;
  };
  const C cases[] = {{{2, 3, 8, 8}, 4, 4},   {{1, 2, 9, 7}, 4, 3},  // overlapping cells
                     {{1, 2, 5, 7}, 7, 9},                         // more cells than pixels
                     {{3, 7, 7}, 3, 2},      {{1, 2, 6, 6}, 1, 1},  {{2, 2, 5, 5}, 5, 5},
                     {{2, 2, 5, 5}, 0, 2},   {{0, 2, 5, 5}, 2, 2},  {{8, 16, 24, 24}, 5, 7},
                     {{1, 1, 1, 1}, 1, 1},   {{2, 3, 1, 9}, 1, 4},
                     {{128, 64, 7, 7}, 1, 1}};  // the ResNet's global average pool
  for (DType dt : {DType::F32, DType::F64})
    for (const C& c : cases) check_adaptive(random_tensor(dt, c.x, rng), c.oh, c.ow, rng);
  // Ties and specials through adaptive max and average.
  HostTensor t = random_tensor(DType::F32, {1, 2, 7, 6}, rng, 0, 3);
  for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<float>()[i] = std::floor(t.view.as<float>()[i]);
  check_adaptive(t, 3, 4, rng);
  add_specials(t, rng);
  check_adaptive(t, 3, 4, rng);
}

// ---------------------------------------------------------------- random

json philox_attrs(int64_t key, const Shape& shape) { return {{"key", key}, {"shape", shape}}; }

TEST(CudaRandom, UniformBitsMatch) {
  SKIP_WITHOUT_GPU();
  const int64_t seeds[] = {0, 1, 42, 0x123456789abcdefLL, -1, std::numeric_limits<int64_t>::min()};
  const int64_t offsets[] = {0, 1, 7, (int64_t{1} << 33) + 5, -3};
  const Shape shapes[] = {{}, {1}, {2}, {3}, {4}, {5}, {7}, {13}, {1023}, {4097}, {3, 5, 7}};
  for (int64_t s : seeds)
    for (int64_t o : offsets) {
      HostTensor seed = i64_scalar(s), off = i64_scalar(o);
      for (const Shape& sh : shapes)
        for (int64_t key : {0, 3, -1}) {
          SCOPED_TRACE("seed " + std::to_string(s) + " offset " + std::to_string(o) + " key " +
                       std::to_string(key) + " shape " + ts::shape_str(sh));
          EXPECT_TRUE(cpu_gpu_agree(kUniform, philox_attrs(key, sh), {&seed, &off}, kExact));
        }
    }
}

TEST(CudaRandom, UniformZooShapes) {
  SKIP_WITHOUT_GPU();
  const Shape shapes[] = {{64, 128}, {64, 64, 12, 12}, {32, 64, 128}, {32, 4, 64, 64}};
  const int64_t seeds[] = {0, 1234567, -987654321987LL};
  for (int64_t s : seeds)
    for (int64_t o : {int64_t{0}, int64_t{17}})
      for (const Shape& sh : shapes)
        for (int64_t key = 0; key < 7; key += 3) {
          HostTensor seed = i64_scalar(s), off = i64_scalar(o);
          SCOPED_TRACE("seed " + std::to_string(s) + " key " + std::to_string(key) + " shape " +
                       ts::shape_str(sh));
          EXPECT_TRUE(cpu_gpu_agree(kUniform, philox_attrs(key, sh), {&seed, &off}, kExact));
        }
}

TEST(CudaRandom, NormalMatches) {
  SKIP_WITHOUT_GPU();
  // Box-Muller in double: CUDA's log/cos may differ from the host's libm by
  // an ulp of double, which can move the float rounding by one float ulp.
  const Tolerance tol{1e-6, 1e-7};
  const Shape shapes[] = {{}, {1}, {3}, {5}, {1000}, {64, 128}, {32, 4, 64, 64}};
  for (int64_t s : {int64_t{0}, int64_t{99}, int64_t{-5}})
    for (int64_t o : {int64_t{0}, int64_t{3}})
      for (const Shape& sh : shapes) {
        HostTensor seed = i64_scalar(s), off = i64_scalar(o);
        SCOPED_TRACE("seed " + std::to_string(s) + " shape " + ts::shape_str(sh));
        EXPECT_TRUE(cpu_gpu_agree(kNormal, philox_attrs(2, sh), {&seed, &off}, tol));
      }
}

// One node's CUDA kernel captured into a CUDA graph once, then replayed with
// new input values copied into the same device buffers (as the step does).
class CapturedNode {
 public:
  CapturedNode(const std::string& op, const json& attrs, const std::vector<const HostTensor*>& inputs)
      : attrs_(attrs) {
    const ts::OpDef* def = ts::OpRegistry::get().find(op);
    std::vector<ts::TensorType> types;
    for (const HostTensor* t : inputs) types.push_back(t->view.type());
    node_ = std::make_unique<ts::NodeCtx>("n0", op, attrs_, types, std::vector<bool>(types.size(), true));
    out_types_ = def->infer(*node_);
    ts::KernelCtx kc{*node_, out_types_, 1};
    const ts::cuda::Ctx& ctx = ts_cuda_test::test_ctx();
    ts::cuda::Build b{kc, ctx.dnn, ctx.blas};
    kernel_ = (*ts::cuda::KernelTable::get().find(op))(b);
    for (const HostTensor* t : inputs) in_.push_back(device(t->view.type()));
    for (const ts::TensorType& t : out_types_) out_.push_back(device(t));
    ts::cuda::check(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal), "capture");
    kernel_->run(in_.data(), out_.data(), ctx);
    ts::cuda::check(cudaStreamEndCapture(ctx.stream, &graph_), "end capture");
    ts::cuda::check(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate");
  }
  ~CapturedNode() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (void* p : bufs_) cudaFree(p);
  }

  std::vector<HostTensor> replay(const std::vector<const HostTensor*>& inputs) {
    const ts::cuda::Ctx& ctx = ts_cuda_test::test_ctx();
    for (size_t i = 0; i < inputs.size(); ++i)
      ts::cuda::check(cudaMemcpy(in_[i].data, inputs[i]->view.data, inputs[i]->view.nbytes(),
                                 cudaMemcpyHostToDevice),
                      "H2D");
    ts::cuda::check(cudaGraphLaunch(exec_, ctx.stream), "graph launch");
    ts::cuda::check(cudaStreamSynchronize(ctx.stream), "graph run");
    std::vector<HostTensor> got;
    for (size_t j = 0; j < out_.size(); ++j) {
      got.emplace_back(out_types_[j].dtype, out_types_[j].shape);
      ts::cuda::check(cudaMemcpy(got[j].view.data, out_[j].data, out_types_[j].nbytes(), cudaMemcpyDeviceToHost),
                      "D2H");
    }
    return got;
  }

 private:
  ts::Tensor device(const ts::TensorType& t) {
    ts::Tensor d;
    d.dtype = t.dtype;
    d.shape = t.shape;
    ts::cuda::check(cudaMalloc(&d.data, std::max<size_t>(t.nbytes(), 1)), "alloc");
    bufs_.push_back(d.data);
    return d;
  }
  json attrs_;
  std::unique_ptr<ts::NodeCtx> node_;
  std::vector<ts::TensorType> out_types_;
  std::unique_ptr<ts::cuda::Kernel> kernel_;
  std::vector<ts::Tensor> in_, out_;
  std::vector<void*> bufs_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.view.nbytes() == b.view.nbytes() && std::memcmp(a.view.data, b.view.data, a.view.nbytes()) == 0;
}

TEST(CudaRandom, GraphReplayReadsSeedFromDevice) {
  SKIP_WITHOUT_GPU();
  const json attrs = philox_attrs(1, {64, 128});
  HostTensor seed = i64_scalar(0), off = i64_scalar(0);
  CapturedNode node(kUniform, attrs, {&seed, &off});
  std::vector<HostTensor> first;
  const std::pair<int64_t, int64_t> steps[] = {{0, 0}, {0, 1}, {7, 1}, {123456789012345LL, 40}, {0, 0}};
  for (auto [s, o] : steps) {
    seed.view.as<int64_t>()[0] = s;
    off.view.as<int64_t>()[0] = o;
    auto got = node.replay({&seed, &off});
    auto want = ts_test::run_op(kUniform, attrs, {&seed, &off});
    EXPECT_TRUE(same_bytes(got[0], want[0])) << "seed " << s << " offset " << o;
    if (first.empty()) first.push_back(std::move(got[0]));
  }
  // Different offsets must give different bits (the graph really re-reads).
  seed.view.as<int64_t>()[0] = 0;
  off.view.as<int64_t>()[0] = 1;
  EXPECT_FALSE(same_bytes(node.replay({&seed, &off})[0], first[0]));
}

TEST(CudaPool, MaxPoolBackwardUnderGraphCapture) {
  SKIP_WITHOUT_GPU();
  // The backward zero-fills with a memset node; a replay must zero again.
  std::mt19937 rng(8);
  const json a = max_attrs({2, 2}, {}, {0, 0}, {1, 1}, false);
  HostTensor x = random_tensor(DType::F32, {4, 8, 12, 12}, rng);
  auto fwd = ts_test::run_op(kMax, a, {&x});
  HostTensor go = random_tensor(DType::F32, {4, 8, 6, 6}, rng);
  CapturedNode node(kMaxBwd, a, {&go, &x, &fwd[1]});
  for (int rep = 0; rep < 2; ++rep) {
    HostTensor x2 = random_tensor(DType::F32, {4, 8, 12, 12}, rng);
    auto f2 = ts_test::run_op(kMax, a, {&x2});
    auto got = node.replay({&go, &x2, &f2[1]});
    auto want = ts_test::run_op(kMaxBwd, a, {&go, &x2, &f2[1]});
    EXPECT_TRUE(same_bytes(got[0], want[0])) << "replay " << rep;
  }
}

}  // namespace

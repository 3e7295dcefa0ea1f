// The pointwise interpreter (src/cuda/pointwise.*) against the CPU kernels:
// each op alone with broadcasting and dtype promotion, and fused groups.
#include "cuda_op_test.h"

namespace {

using json = nlohmann::json;
using ts::DType;
using ts_cuda_test::cpu_gpu_agree;
using ts_cuda_test::random_tensor;

// Within an ulp or two where both compute the same IEEE operations; a few ulps for
// CUDA's transcendental functions.
const ts_cuda_test::Tolerance exact{3e-7, 1e-7};  // nvcc and GCC may each contract a*b+c to an FMA
const ts_cuda_test::Tolerance ulps{4e-6, 1e-7};
// GELU's 1 + erf(x / sqrt2) cancels for negative x, so an ulp of erf (the
// CPU's vector erf against CUDA's erff) is a large relative error there.
const ts_cuda_test::Tolerance cancels{4e-6, 1e-6};

TEST(CudaPointwise, BinaryOpsBroadcastAndPromote) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  const std::vector<std::pair<ts::Shape, ts::Shape>> shapes = {
      {{64, 128}, {64, 128}}, {{64, 128}, {128}}, {{32, 1, 7}, {5, 1}}, {{}, {3, 4}}, {{1000}, {}}};
  for (const char* op : {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor",
                         "aten.maximum.default", "aten.minimum.default", "aten.eq.Tensor",
                         "aten.gt.Tensor", "aten.le.Tensor"})
    for (const auto& [sa, sb] : shapes) {
      auto a = random_tensor(DType::F32, sa, rng, -2, 2);
      auto b = random_tensor(DType::F32, sb, rng, 0.5, 2);
      EXPECT_TRUE(cpu_gpu_agree(op, json::object(), {&a, &b}, exact)) << op;
    }
  // Promotion: int64 with float32, bool with float32, float64 with float32.
  auto i = random_tensor(DType::I64, {8, 9}, rng, -50, 50);
  auto f = random_tensor(DType::F32, {9}, rng);
  auto d = random_tensor(DType::F64, {8, 9}, rng);
  auto m = random_tensor(DType::Bool, {8, 9}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.add.Tensor", {{"alpha", 2}}, {&i, &f}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.mul.Tensor", json::object(), {&m, &f}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.sub.Tensor", {{"alpha", 0.5}}, {&d, &f}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.add.Tensor", json::object(), {&i, &i}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.div.Tensor", json::object(), {&i, &i}, exact));
}

TEST(CudaPointwise, ScalarFormsWhereAndMaskedFill) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  auto x = random_tensor(DType::F32, {33, 17}, rng, -3, 3);
  auto t = random_tensor(DType::I64, {2048}, rng, -1, 10);
  for (const char* op : {"aten.add.Scalar", "aten.mul.Scalar", "aten.div.Scalar", "aten.le.Scalar",
                         "aten.ge.Scalar", "aten.ne.Scalar", "aten.eq.Scalar"}) {
    EXPECT_TRUE(cpu_gpu_agree(op, {{"other", 0.1}}, {&x}, exact)) << op;
    EXPECT_TRUE(cpu_gpu_agree(op, {{"other", 3}}, {&x}, exact)) << op;
  }
  EXPECT_TRUE(cpu_gpu_agree("aten.ne.Scalar", {{"other", -1}}, {&t}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.sub.Scalar", {{"other", 2}, {"alpha", 3}}, {&t}, exact));
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7})
    EXPECT_TRUE(cpu_gpu_agree("aten.pow.Tensor_Scalar", {{"exponent", e}},
                              {&x}, e == 1.7 ? ulps : exact))
        << e;
  auto c = random_tensor(DType::Bool, {64, 64}, rng);
  auto a = random_tensor(DType::F32, {4, 64, 64}, rng);
  auto b = random_tensor(DType::F32, {}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.where.self", json::object(), {&c, &a, &b}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.masked_fill.Scalar", {{"value", "-inf"}}, {&a, &c}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.masked_fill.Scalar", {{"value", 0.5}}, {&a, &c}, exact));
}

TEST(CudaPointwise, UnaryOpsAndCasts) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  auto x = random_tensor(DType::F32, {4097}, rng, -4, 4);
  auto p = random_tensor(DType::F32, {4097}, rng, 0.01, 4);
  for (const char* op : {"aten.neg.default", "aten.relu.default", "aten.abs.default",
                         "aten.sign.default", "aten.sqrt.default", "aten.rsqrt.default",
                         "aten.reciprocal.default"})
    EXPECT_TRUE(cpu_gpu_agree(op, json::object(), {&p}, exact)) << op;
  for (const char* op : {"aten.exp.default", "aten.expm1.default", "aten.log.default",
                         "aten.log1p.default", "aten.sigmoid.default", "aten.tanh.default",
                         "aten.erf.default", "aten.gelu.default"})
    EXPECT_TRUE(cpu_gpu_agree(op, json::object(), {op == std::string("aten.log.default") ? &p : &x},
                              op == std::string("aten.gelu.default") ? cancels : ulps))
        << op;
  EXPECT_TRUE(cpu_gpu_agree("aten.gelu.default", {{"approximate", "tanh"}}, {&x}, cancels));
  EXPECT_TRUE(cpu_gpu_agree("aten.clamp.default", {{"min", -1.5}, {"max", 2}}, {&x}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.clamp.default", {{"min", 1e-8}, {"max", nullptr}}, {&p}, exact));
  EXPECT_TRUE(cpu_gpu_agree("aten.clamp.default", {{"max", 0}}, {&x}, exact));
  auto i = random_tensor(DType::I64, {100}, rng, -1000, 1000);
  EXPECT_TRUE(cpu_gpu_agree("aten.clamp.default", {{"min", -10}, {"max", 300}}, {&i}, exact));
  for (const char* dt : {"float32", "float64", "int64", "bool", "int32"}) {
    EXPECT_TRUE(cpu_gpu_agree("aten._to_copy.default", {{"dtype", dt}}, {&x}, exact)) << dt;
    EXPECT_TRUE(cpu_gpu_agree("aten._to_copy.default", {{"dtype", dt}}, {&i}, exact)) << dt;
  }
}

// A fused group as fuse_elementwise writes it: Adam's update of one
// parameter (two inputs of the group's numel, 0-d LR, an immediate).
TEST(CudaPointwise, FusedGroups) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  auto w = random_tensor(DType::F32, {128, 96}, rng);
  auto g = random_tensor(DType::F32, {128, 96}, rng);
  auto v = random_tensor(DType::F32, {128, 96}, rng, 0, 1);
  auto lr = random_tensor(DType::F32, {}, rng, 0.001, 0.01);
  // (json::array throughout: a braced ["in", 2] pair would read as an object.)
  auto ref = [](const char* kind, int i) { return json::array({kind, i}); };
  auto member = [](const char* name, const char* op, json attrs, json args) {
    return json{{"name", name}, {"op", op}, {"attrs", attrs}, {"args", args}};
  };
  json members = json::array({
      member("c", "trainstep.constant", {{"value", 1e-8}, {"dtype", "float32"}}, json::array()),
      member("s", "aten.sqrt.default", json::object(), json::array({ref("in", 2)})),
      member("d", "aten.add.Tensor", {{"alpha", 1}}, json::array({ref("m", 1), ref("m", 0)})),
      member("q", "aten.div.Tensor", json::object(), json::array({ref("in", 1), ref("m", 2)})),
      member("u", "aten.mul.Tensor", json::object(), json::array({ref("m", 3), ref("in", 3)})),
      member("n", "aten.sub.Tensor", {{"alpha", 1}}, json::array({ref("in", 0), ref("m", 4)})),
      member("z", "aten.le.Scalar", {{"other", 0}}, json::array({ref("m", 5)})),
  });
  json attrs = {{"members", members}, {"outputs", json::array({5, 6})}};
  EXPECT_TRUE(cpu_gpu_agree("trainstep.fused_elementwise", attrs, {&w, &g, &v, &lr}, exact));
}

TEST(CudaPointwise, RefusesWhatItCannotCompute) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  auto i = random_tensor(DType::I64, {10}, rng, 1, 5);
  EXPECT_THROW(cpu_gpu_agree("aten.pow.Tensor_Scalar", {{"exponent", 2}}, {&i}, exact), ts::Error);
}

}  // namespace

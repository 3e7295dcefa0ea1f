// A session on the GPU against the same session on the CPU: steps, state
// read and written by name, checkpoints, and the errors of a machine or
// build without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda_op_test.h"
#include "test_util.h"
#include "tiny_artifact.h"
#include "runtime/node_io.h"
#include "trainstep/session.h"

namespace {

using ts::DType;
using ts_test::error_of;
using ts_test::make_temp_dir;
using ts::HostTensor;

ts::SessionOptions on(ts::Device d) {
  ts::SessionOptions o;
  o.device = d;
  o.threads = 1;
  return o;
}

TEST(CudaSession, NoGpuIsOneClearError) {
  if (ts_cuda_test::have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  const std::string path = ts_test::write_tiny_artifact(make_temp_dir());
  EXPECT_EQ(error_of([&] { ts::Session::open(path, on(ts::Device::Cuda)); }).rfind(
                "--device cuda: no usable CUDA device (", 0),
            0u);
}

TEST(CudaSession, StepsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::string path = ts_test::write_tiny_artifact(make_temp_dir());
  auto cpu = ts::Session::open(path, on(ts::Device::Cpu));
  auto gpu = ts::Session::open(path, on(ts::Device::Cuda));
  std::mt19937 rng(7);
  HostTensor y(DType::I64, {2});
  for (int k = 0; k < 4; ++k) {
    HostTensor x = ts_test::random_f32({2, 4}, rng);
    // The matmul and the mean sum in other orders on the GPU.
    const float want = cpu->train_step({x.view}, y.view);
    EXPECT_NEAR(gpu->train_step({x.view}, y.view), want, 1e-6 * std::fabs(want) + 1e-7);
    const ts::Tensor& a = cpu->state("w");
    const ts::Tensor& b = gpu->state("w");  // read back from the device
    for (int64_t i = 0; i < a.numel(); ++i)
      EXPECT_NEAR(b.as<float>()[i], a.as<float>()[i], 1e-6 * std::fabs(a.as<float>()[i]) + 1e-7);
  }
  EXPECT_EQ(gpu->step(), cpu->step());
  HostTensor x = ts_test::random_f32({2, 4}, rng);
  cpu->eval_step({x.view}, y.view);
  gpu->eval_step({x.view}, y.view);
  const ts::Tensor& a = cpu->eval_sample_loss();
  const ts::Tensor& b = gpu->eval_sample_loss();
  for (int64_t i = 0; i < a.numel(); ++i)
    EXPECT_NEAR(b.as<float>()[i], a.as<float>()[i], 1e-6 * std::fabs(a.as<float>()[i]) + 1e-7);
}

TEST(CudaSession, SetStateAndCheckpointGoThroughTheDevice) {
  SKIP_WITHOUT_GPU();
  const std::string dir = make_temp_dir();
  const std::string path = ts_test::write_tiny_artifact(dir);
  auto gpu = ts::Session::open(path, on(ts::Device::Cuda));
  auto cpu = ts::Session::open(path, on(ts::Device::Cpu));
  HostTensor w(DType::F32, {4, 3});
  for (int i = 0; i < 12; ++i) w.view.as<float>()[i] = 0.25f * i;
  gpu->set_state("w", w.view);
  cpu->set_state("w", w.view);
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 1.0f - 0.1f * i;
  const float l0 = cpu->train_step({x.view}, y.view);
  EXPECT_NEAR(gpu->train_step({x.view}, y.view), l0, 1e-6 * std::fabs(l0) + 1e-7);
  gpu->save_checkpoint(dir + "/g.ckpt");
  auto again = ts::Session::open(path, on(ts::Device::Cuda));
  again->load_checkpoint(dir + "/g.ckpt");
  EXPECT_EQ(again->step(), 1);
  // Resumed on the GPU from the GPU's checkpoint: the same step as the GPU
  // session that wrote it would take.
  const float l1 = gpu->train_step({x.view}, y.view);
  EXPECT_EQ(again->train_step({x.view}, y.view), l1);
  EXPECT_EQ(std::memcmp(again->state("w").data, gpu->state("w").data, 12 * sizeof(float)), 0);
}

TEST(CudaSession, RefusesWhatOnlyTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  const std::string path = ts_test::write_tiny_artifact(make_temp_dir());
  ts::SessionOptions o = on(ts::Device::Cuda);
  o.on_nonfinite = ts::NonFinite::Skip;
  EXPECT_NE(error_of([&] { ts::Session::open(path, o); }).find("runs on --device cpu only"),
            std::string::npos);
  auto s = ts::Session::open(path, on(ts::Device::Cuda));
  EXPECT_NE(error_of([&] { s->grad_step({}, std::vector<ts::Tensor>{}); }).find("runs on --device cpu only"),
            std::string::npos);
}

// Profiled steps run kernel by kernel (no graph) and give the same results.
TEST(CudaSession, ProfileTimesEveryKernel) {
  SKIP_WITHOUT_GPU();
  const std::string path = ts_test::write_tiny_artifact(make_temp_dir());
  auto a = ts::Session::open(path, on(ts::Device::Cuda));
  auto b = ts::Session::open(path, on(ts::Device::Cuda));
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 0.5f + 0.1f * i;
  a->train_step({x.view}, y.view);  // recorded as a graph after this run
  b->train_step({x.view}, y.view);
  b->set_profiling(true);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(b->train_step({x.view}, y.view), a->train_step({x.view}, y.view));
  ASSERT_FALSE(b->train_profile().empty());
  for (const ts::NodeTime& t : b->train_profile()) EXPECT_GT(t.seconds, 0) << t.node->name;
}

}  // namespace

// Which nodes run on one thread (src/runtime/thread_choice.h): a node with
// small inputs and outputs is built for one thread and runs with OpenMP's
// thread count at one, which is set back after it; larger nodes,
// collectives and one-thread executors keep what they had.
#include <gtest/gtest.h>
#include <omp.h>

#include "ops/op.h"
#include "runtime/thread_choice.h"

namespace {

// What the probe kernel saw: the threads it was built for, and OpenMP's
// thread count while it ran.
int g_built_for = 0, g_ran_with = 0;

class Probe : public ts::Kernel {
 public:
  void run(const ts::Tensor*, ts::Tensor*) override { g_ran_with = omp_get_max_threads(); }
};

std::unique_ptr<ts::Kernel> make_probe(const ts::KernelCtx& k) {
  g_built_for = k.threads;
  return std::make_unique<Probe>();
}

// Builds and runs the probe as the executor would, with `threads` and a
// node of io_bytes; returns {built for, ran with}.
std::pair<int, int> probe(int threads, size_t io_bytes, ts::CommRole comm = ts::CommRole::None) {
  ts::OpDef def;
  def.name = "test.probe";
  def.make = make_probe;
  def.comm = comm;
  const ts::NodeCtx node("n", "test.probe", ts::json::object(), {}, {});
  const std::vector<ts::TensorType> outs;
  const ts::KernelCtx k{node, outs, threads};
  omp_set_num_threads(threads);
  auto kernel = ts::make_node_kernel(def, k, io_bytes);
  kernel->run(nullptr, nullptr);
  EXPECT_EQ(omp_get_max_threads(), threads) << "the thread count is set back";
  return {g_built_for, g_ran_with};
}

}  // namespace

TEST(ThreadChoice, SmallNodesRunOnOneThread) {
  EXPECT_EQ(probe(2, 1024), std::make_pair(1, 1));
  EXPECT_EQ(probe(2, ts::kOneThreadMaxBytes), std::make_pair(1, 1));
}

TEST(ThreadChoice, LargeNodesKeepEveryThread) {
  EXPECT_EQ(probe(2, ts::kOneThreadMaxBytes + 1), std::make_pair(2, 2));
}

TEST(ThreadChoice, CollectivesAndOneThreadExecutorsAreLeftAlone) {
  EXPECT_EQ(probe(2, 1024, ts::CommRole::Start), std::make_pair(2, 2));
  EXPECT_EQ(probe(1, 1024), std::make_pair(1, 1));
  EXPECT_FALSE(ts::runs_on_one_thread(ts::OpDef{}, 1, 0));
}

// The data-parallel step (passes/data_parallel.h): buckets as DDP makes
// them, the all-reduce placed between backward and update, the schedule
// keeping the start early and the wait late, and the joined step computing
// what grad_step then apply_step compute, with an in-process stand-in for
// the other ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "ir/rewrite.h"
#include "ir/text.h"
#include "linear_grad_step.h"
#include "passes/data_parallel.h"
#include "passes/schedule.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "trainstep/collective.h"

namespace {

const char* const kGrad = kLinearGradStep;

const char* kApply =
    "func apply_step(%w: float32[64, 48] {role=state, state=w}, %b: float32[64] {role=state, "
    "state=b}, %gw: float32[64, 48] {role=grad, state=w}, %gb: float32[64] {role=grad, "
    "state=b}, %lr: float32[] {role=lr}) {\n"
    "  %sw = aten.mul.Tensor(%gw, %lr)\n"
    "  %w2 = aten.sub.Tensor(%w, %sw) {\"alpha\":1}\n"
    "  %sb = aten.mul.Tensor(%gb, %lr)\n"
    "  %b2 = aten.sub.Tensor(%b, %sb) {\"alpha\":1}\n"
    "  return %w2 {role=state, state=w}, %b2 {role=state, state=b}\n}\n";

int position(const ts::Function& f, const std::string& node) {
  for (size_t i = 0; i < f.nodes.size(); ++i)
    if (f.nodes[i].name == node) return static_cast<int>(i);
  ADD_FAILURE() << "no node " << node;
  return -1;
}

// Stands in for a second rank that made the same gradients: a reduction
// doubles the buffer when it is waited for. Logs what it is asked.
class TwinRank : public ts::Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Request all_reduce(void* buf, size_t count, ts::DType dtype, ts::ReduceOp op,
                     const char* what) override {
    log.push_back(std::string("start ") + what);
    pending.push_back({static_cast<float*>(buf), count});
    return static_cast<Request>(pending.size()) - 1;
  }
  void wait(Request r) override {
    log.push_back("wait " + std::to_string(r));
    for (size_t i = 0; i < pending[r].second; ++i) pending[r].first[i] *= 2;
  }
  Request reduce_scatter(void*, const size_t*, ts::DType, ts::ReduceOp, const char*) override {
    ADD_FAILURE() << "unsharded steps do not reduce-scatter";
    return 0;
  }
  Request all_gather(void*, const size_t*, ts::DType, const char*) override {
    ADD_FAILURE() << "unsharded steps do not all-gather";
    return 0;
  }
  void broadcast(void*, size_t, int, const char*) override {}
  double reduce_seconds() const override { return 0; }
  void reset_reduce_seconds() override {}
  [[noreturn]] void abort(int) override { std::abort(); }
  std::vector<std::string> log;
  std::vector<std::pair<float*, size_t>> pending;
};

ts::HostTensor random_tensor(const ts::TensorType& t, std::mt19937& rng) {
  ts::HostTensor h(t.dtype, t.shape);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < h.view.numel(); ++i) h.view.as<float>()[i] = d(rng);
  return h;
}

}  // namespace

TEST(GradBuckets, ReverseParameterOrderWithASmallFirstBucket) {
  const ts::Function g = ts::parse_function(kGrad);
  ts::BucketOptions o;  // 1 MiB first: both fit
  auto one = ts::grad_buckets(g, o);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].params, (std::vector<std::string>{"b", "w"}));
  EXPECT_EQ(one[0].bytes, 64u * 4 + 64 * 48 * 4);
  o.first_bytes = 100;  // b (256 bytes) closes the first bucket
  auto two = ts::grad_buckets(g, o);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].params, std::vector<std::string>{"b"});
  EXPECT_EQ(two[1].params, std::vector<std::string>{"w"});
}

TEST(DataParallelStep, StartsFollowTheirGradientsAndWaitsPrecedeTheUpdates) {
  const ts::Function g = ts::parse_function(kGrad), a = ts::parse_function(kApply);
  ts::BucketOptions o;
  o.first_bytes = 100;
  ts::Function f = ts::data_parallel_step(g, a, o, "test");
  // Signature: train_step's.
  EXPECT_EQ(f.name, "train_step");
  EXPECT_GE(f.find_input(ts::Role::Lr), 0);
  EXPECT_GE(f.find_output(ts::Role::Loss), 0);
  EXPECT_GE(f.find_output(ts::Role::State, "w"), 0);
  EXPECT_LT(f.find_output(ts::Role::Grad, "w"), 0);
  for (bool scheduled : {false, true}) {
    if (scheduled) ts::schedule_updates_early(f);
    SCOPED_TRACE(scheduled ? "after schedule_updates_early" : "as built");
    // Bucket 0 holds b, bucket 1 holds w.
    EXPECT_EQ(f.nodes[position(f, "all_reduce_0/start")].op, "trainstep.all_reduce_start");
    EXPECT_EQ(f.nodes[position(f, "all_reduce_0/wait")].op, "trainstep.all_reduce_wait");
    EXPECT_EQ(position(f, "all_reduce_0/start"), position(f, "gb") + 1);
    EXPECT_EQ(position(f, "all_reduce_1/start"), position(f, "gw") + 1);
    const int last_backward = std::max(position(f, "gw"), position(f, "gb"));
    EXPECT_GT(position(f, "all_reduce_0/wait"), last_backward);
    EXPECT_GT(position(f, "all_reduce_1/wait"), last_backward);
    EXPECT_LT(position(f, "all_reduce_0/wait"), position(f, "apply/sb"));
    EXPECT_LT(position(f, "all_reduce_1/wait"), position(f, "apply/sw"));
  }
  // A gradient apply_step takes and grad_step does not make is an error.
  const std::string no_b = std::string(kGrad).replace(
      std::string(kGrad).find(", %gb {role=grad, state=b}"), 26, "");
  try {
    ts::data_parallel_step(ts::parse_function(no_b), a, o, "art.tstep");
    ADD_FAILURE() << "no error";
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find("art.tstep: the data-parallel step: apply_step takes "
                                         "the gradient of 'b'"),
              std::string::npos)
        << e.what();
  }
}

TEST(DataParallelStep, ComputesGradThenApplyWithTheAveragedGradient) {
  const ts::Function g = ts::parse_function(kGrad), a = ts::parse_function(kApply);
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    ts::BucketOptions o;
    o.first_bytes = 100;
    o.overlap = overlap;
    ts::Function f = ts::data_parallel_step(g, a, o, "test");
    ts::schedule_updates_early(f);
    std::mt19937 rng(7);
    std::map<std::string, ts::HostTensor> in;  // by value name
    for (const auto& p : f.inputs) in.emplace(p.name, random_tensor(p.type, rng));
    *in.at("lr").view.as<float>() = 0.1f;

    // Reference: grad_step, then apply_step on its gradients.
    ts::Executor ge(g, 1, ts::plan_memory(g, false));
    for (size_t i = 0; i < g.inputs.size(); ++i) ge.bind_input(int(i), in.at(g.inputs[i].name).view.data);
    ge.run();
    ts::Executor ae(a, 1, ts::plan_memory(a, false));
    for (size_t i = 0; i < a.inputs.size(); ++i) {
      const ts::Port& p = a.inputs[i];
      void* d = p.role == ts::Role::Grad
                    ? ge.output(g.find_output(ts::Role::Grad, p.state)).data
                    : in.at(p.name).view.data;
      ae.bind_input(int(i), d);
    }
    ae.run();

    TwinRank twin;
    ts::Executor ex(f, 1, ts::plan_memory(f, false), &twin);
    for (size_t i = 0; i < f.inputs.size(); ++i) ex.bind_input(int(i), in.at(f.inputs[i].name).view.data);
    ex.run();
    for (const char* s : {"w", "b"}) {
      const ts::Tensor& want = ae.output(a.find_output(ts::Role::State, s));
      const ts::Tensor& got = ex.output(f.find_output(ts::Role::State, s));
      // (2g) / 2 is g exactly: the same bits.
      EXPECT_EQ(std::memcmp(want.data, got.data, want.nbytes()), 0) << s;
    }
    // Overlap: both reductions start before the first wait; without, each
    // runs inside its wait (the stand-in logs no start/wait pairs then).
    if (overlap) {
      ASSERT_EQ(twin.log.size(), 4u);
      EXPECT_EQ(twin.log[0].rfind("start all-reduce 'all_reduce_", 0), 0u) << twin.log[0];
      EXPECT_EQ(twin.log[1].rfind("start all-reduce 'all_reduce_", 0), 0u) << twin.log[1];
    } else {
      ASSERT_EQ(twin.log.size(), 4u);
      EXPECT_EQ(twin.log[0], "start all-reduce 'all_reduce_0/wait'");
      EXPECT_EQ(twin.log[1], "wait 0");
    }
  }
}

// The sharded optimizer update (passes/shard_optimizer.h): who updates and
// holds what, read from the update graph; each rank's update reading only
// its own share; and the collectives every rank must run, kept even where
// this rank reads nothing of them. Whole runs against unsharded
// data-parallel training are tests/python/test_zero.py (over MPI).
#include <gtest/gtest.h>

#include "ir/rewrite.h"
#include "ir/text.h"
#include "linear_grad_step.h"
#include "passes/cleanup.h"
#include "passes/data_parallel.h"
#include "passes/shard_optimizer.h"
#include "test_util.h"

namespace {

// Momentum SGD on w (48x64) and b (64), with a step count every update
// reads and a total-norm scale when `clip`.
std::string apply_text(bool clip) {
  std::string s =
      "func apply_step(%w: float32[64, 48] {role=state, state=w}, %b: float32[64] {role=state, "
      "state=b}, %mw: float32[64, 48] {role=state, state=optim/w/m}, %mb: float32[64] "
      "{role=state, state=optim/b/m}, %n: float32[] {role=state, state=optim/step}, "
      "%gw: float32[64, 48] {role=grad, state=w}, %gb: float32[64] {role=grad, state=b}, "
      "%lr: float32[] {role=lr}) {\n"
      "  %n2 = aten.add.Scalar(%n) {\"other\":1,\"alpha\":1}\n";
  if (clip)
    s += "  %sw = aten.mul.Tensor(%gw, %gw)\n  %tw = aten.sum.default(%sw) {\"dtype\":null}\n"
         "  %sb = aten.mul.Tensor(%gb, %gb)\n  %tb = aten.sum.default(%sb) {\"dtype\":null}\n"
         "  %t = aten.add.Tensor(%tw, %tb) {\"alpha\":1}\n"
         "  %cw = aten.mul.Tensor(%gw, %t)\n  %cb = aten.mul.Tensor(%gb, %t)\n";
  else
    s += "  %cw = aten.mul.Tensor(%gw, %lr)\n  %cb = aten.mul.Tensor(%gb, %lr)\n";
  s += "  %mw2 = aten.add.Tensor(%mw, %cw) {\"alpha\":1}\n"
       "  %mb2 = aten.add.Tensor(%mb, %cb) {\"alpha\":1}\n"
       "  %uw = aten.mul.Tensor(%mw2, %n2)\n  %ub = aten.mul.Tensor(%mb2, %n2)\n"
       "  %w2 = aten.sub.Tensor(%w, %uw) {\"alpha\":1}\n"
       "  %b2 = aten.sub.Tensor(%b, %ub) {\"alpha\":1}\n"
       "  return %w2 {role=state, state=w}, %b2 {role=state, state=b}, %mw2 {role=state, "
       "state=optim/w/m}, %mb2 {role=state, state=optim/b/m}, %n2 {role=state, "
       "state=optim/step}\n}\n";
  return s;
}

const char* const kGrad = kLinearGradStep;

int count_op(const ts::Function& f, const std::string& op) {
  int n = 0;
  for (const auto& node : f.nodes) n += node.op == op;
  return n;
}

}  // namespace

TEST(ShardPlan, StateGoesWithTheParameterWhoseUpdateReadsItAndAShareCountStaysEverywhere) {
  const ts::Function a = ts::parse_function(apply_text(false));
  const ts::ShardPlan p = ts::plan_shards(a, 2, "art");
  // Largest first: w (and its momentum) to rank 0, b to the lighter rank 1.
  EXPECT_EQ(p.param_owner.at("w"), 0);
  EXPECT_EQ(p.param_owner.at("b"), 1);
  EXPECT_EQ(p.state_owner.at("optim/w/m"), 0);
  EXPECT_EQ(p.state_owner.at("optim/b/m"), 1);
  EXPECT_FALSE(p.state_owner.count("optim/step"));  // read by both updates, reads neither
  EXPECT_TRUE(p.holds("optim/step", 1));
  EXPECT_FALSE(p.holds("optim/w/m", 1));
  EXPECT_EQ(p.reads_all_grads, "");
  // Three ranks: the third updates nothing.
  const ts::ShardPlan three = ts::plan_shards(a, 3, "art");
  EXPECT_EQ(three.param_owner.at("w"), 0);
  EXPECT_EQ(three.param_owner.at("b"), 1);
}

TEST(ShardPlan, ClippingByTheTotalNormReadsEveryGradient) {
  const ts::ShardPlan p = ts::plan_shards(ts::parse_function(apply_text(true)), 2, "art");
  EXPECT_EQ(p.state_owner.at("optim/b/m"), 1);  // still sharded: clipping reads no state
  EXPECT_NE(p.reads_all_grads.find("reads the gradient of"), std::string::npos)
      << p.reads_all_grads;
}

TEST(ShardApply, ARankReadsItsShareAndStillOutputsEveryParameter) {
  const ts::Function a = ts::parse_function(apply_text(false));
  const ts::ShardPlan p = ts::plan_shards(a, 2, "art");
  ts::BucketOptions o;
  const ts::Function r1 = ts::shard_apply(a, p, 1, o, "art");
  EXPECT_LT(r1.find_input(ts::Role::State, "optim/w/m"), 0);
  EXPECT_LT(r1.find_input(ts::Role::Grad, "w"), 0);
  EXPECT_GE(r1.find_input(ts::Role::Grad, "b"), 0);
  EXPECT_GE(r1.find_input(ts::Role::State, "optim/step"), 0);
  for (const char* s : {"w", "b", "optim/b/m", "optim/step"})
    EXPECT_GE(r1.find_output(ts::Role::State, s), 0) << s;
  EXPECT_LT(r1.find_output(ts::Role::State, "optim/w/m"), 0);
  EXPECT_EQ(count_op(r1, "trainstep.all_gather_start"), 1);
  EXPECT_EQ(count_op(r1, "trainstep.all_gather_wait"), 1);
  // Reading another rank's state is refused, naming it.
  ts::ShardPlan bad = p;
  bad.state_owner["optim/step"] = 0;
  const std::string err = ts_test::error_of([&] { ts::shard_apply(a, bad, 1, o, "art.tstep"); });
  EXPECT_NE(err.find("art.tstep: --shard-optimizer: rank 1's update reads "
                     "optimizer state 'optim/step', which another rank holds"),
            std::string::npos)
      << err;
}

TEST(ShardedDataParallelStep, ARankThatUpdatesNothingInABucketStillTakesPartInIt) {
  const ts::Function g = ts::parse_function(kGrad), a = ts::parse_function(apply_text(false));
  const ts::ShardPlan p = ts::plan_shards(a, 2, "art");
  ts::BucketOptions o;
  o.first_bytes = 100;  // bucket 0: b (rank 1's), bucket 1: w (rank 0's)
  std::vector<std::string> chains[2];
  for (int rank : {0, 1}) {
    ts::Function f = ts::data_parallel_step(g, a, o, "art", &p, rank);
    ts::dce(f);
    ts::compact(f);
    SCOPED_TRACE(rank);
    // Both buckets are reduce-scattered on both ranks; each rank's waits
    // unpack its own gradients only (one wait has none), and nothing drops
    // the empty one.
    EXPECT_EQ(count_op(f, "trainstep.reduce_scatter_start"), 2);
    EXPECT_EQ(count_op(f, "trainstep.reduce_scatter_wait"), 2);
    EXPECT_EQ(count_op(f, "trainstep.all_gather_start"), 1);
    int empty = 0;
    for (const auto& n : f.nodes) empty += n.op == "trainstep.reduce_scatter_wait" && n.outputs.empty();
    EXPECT_EQ(empty, 1);
    // The starts form one chain (each after the one before).
    std::vector<std::string>& chain = chains[rank];
    for (const auto& n : f.nodes)
      if (n.op.find("_start") != std::string::npos) {
        chain.push_back(n.name);
        EXPECT_EQ(n.attrs.contains("after"), chain.size() > 1) << n.name;
      }
    ASSERT_EQ(chain.size(), 3u);
    EXPECT_EQ(chain.back(), "apply/all_gather_0/start");
  }
  // The same order on both ranks, though their updates differ.
  EXPECT_EQ(chains[0], chains[1]);
}

// A sharded optimizer update (ZeRO stage 1, as PyTorch's
// ZeroRedundancyOptimizer shards it): each rank updates a share of the
// parameters and holds only their optimizer state; the new parameters are
// then all-gathered so every rank has them all.
//
// Shares are whole parameters (an update such as Muon's or LAMB's reads a
// whole matrix), found from the update graph itself: an optimizer state
// goes with the parameters whose update reads it, a state whose update
// reads no parameter and no gradient (a shared step count) stays on every
// rank, and the groups are dealt to the ranks largest first, each to the
// rank holding the fewest bytes so far.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/program.h"
#include "trainstep/collective.h"

namespace ts {

struct ShardPlan {
  int ranks = 1;
  // Each parameter the update changes -> the rank that updates it.
  std::map<std::string, int> param_owner;
  // Optimizer state held by one rank only -> that rank. Absent: every rank
  // holds it (parameters, buffers, state shared by all the updates).
  std::map<std::string, int> state_owner;
  // "" when each rank's update reads only its own parameters' gradients
  // (they are then reduce-scattered). Else why not, e.g. "the update of
  // 'fc1.weight' reads the gradient of 'fc2.weight'" (clipping by the total
  // norm): every rank then gets every gradient (all-reduce).
  std::string reads_all_grads;

  // The rank that updates `param`; 0 for a gradient no update reads.
  int owner(const std::string& param) const {
    auto it = param_owner.find(param);
    return it == param_owner.end() ? 0 : it->second;
  }
  bool holds(const std::string& state, int rank) const {
    auto it = state_owner.find(state);
    return it == state_owner.end() || it->second == rank;
  }
};

// `apply` is apply_step (parameters, optimizer state, LR and gradients in;
// new parameters and optimizer state out). Fails, naming `what`, where the
// update cannot be shared out (a rank's update would read optimizer state
// another rank holds).
ShardPlan plan_shards(const Function& apply, int ranks, const std::string& what);

// Rank `rank`'s apply_step: the update of its parameters and its optimizer
// state (and of the state every rank holds), then an all-gather of the new
// parameters in buckets of up to o.cap_bytes, so it still outputs every new
// parameter. It takes only the inputs it reads: no other rank's optimizer
// state and, unless plan.reads_all_grads, no other rank's gradients.
Function shard_apply(const Function& apply, const ShardPlan& plan, int rank,
                     const BucketOptions& o, const std::string& what);

// Orders a bucket's parameters by the rank that updates them (stably) and
// gives each rank's element count in it: the chunks of a reduce-scatter or
// all-gather (attr counts). `numel` is each parameter's element count.
json chunk_counts(const ShardPlan& plan, std::vector<std::string>& params,
                  const std::map<std::string, int64_t>& numel);

// Chains f's collective starts in f's node order: each start not yet
// chained (attr after) reads the request of the start before it. Ranks
// running different functions then still start the same collectives in
// the same order. A function chained before keeps its links, so a step
// built around a chained one (data_parallel_step around shard_apply)
// chains as a whole.
void chain_collectives(Function& f);

}  // namespace ts

// What keeps data-parallel replicas equal (one Session per rank): each
// rank's RNG stream, the check that every rank loaded the same model, the
// broadcast of one rank's state, and the check that the states still agree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/program.h"
#include "trainstep/collective.h"

namespace ts {

// The RNG seed of rank r's steps: the seed itself on rank 0, a stream far
// from it (splitmix64 of seed and rank) on every other rank.
int64_t rank_seed(int64_t seed, int rank);

// Throws, naming `artifact`, unless every rank loaded the same model, state
// layout and batch size (a mismatch would pair the wrong buffers).
void check_same_model(Collective& c, const Program& p, int64_t batch, const std::string& artifact);

// The counters a replica carries beside its tensors.
struct ReplicaCounters {
  int64_t step = 0, seed = 0, skipped = 0;
  double lr = 0;
};

// Every rank takes rank `root`'s tensors and counters.
void broadcast_replica(Collective& c, int root, const std::vector<Tensor*>& tensors,
                       ReplicaCounters& counters);

// Throws unless `tensors` are the same bits on every rank (one hash compared
// over the ranks); `step` names when.
void check_replicated(Collective& c, const std::vector<const Tensor*>& tensors, int64_t step);

}  // namespace ts

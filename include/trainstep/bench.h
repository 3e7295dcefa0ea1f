// Time a session's training step, public: what `trainstep bench` runs and
// prints. bench() runs warm-up steps, then timed steps on the artifact's
// golden batch, and returns their times; with `profile`, also the time of
// every node, which kernels the compiler chose by measurement, and (with
// several ranks) the all-reduce's share. The profile pieces are calls of
// their own too, for a program that runs its own steps.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "trainstep/session.h"

namespace ts {

// One node's time over the steps run with Session::set_profiling on.
struct NodeProfile {
  std::string node, op;
  std::string output_type;       // the first declared output's ("" if none)
  bool trans_a = false, trans_b = false;  // a product's transposition flags
  bool data_movement = false;    // a copy kernel (moves data, computes nothing)
  double seconds = 0;
  double layout_seconds = 0;     // of which layout reorders inside the kernel (CPU)
};
// train_step's nodes, in schedule order (empty before any profiled step).
std::vector<NodeProfile> train_profile(const Session& s);

// Where a node had several implementations: the pick for one computation
// (a key such as "gemm m=1024 n=256 k=32 a^T") and how it was made,
// e.g. "small_k (onednn 241.6 us, small_k 156.6 us; cached)".
struct KernelPick {
  std::string key;
  int nodes = 0;  // nodes of train_step with this key
  std::string choice;
};
// train_step's picks, by key (CPU only; empty on a device).
std::vector<KernelPick> kernel_picks(const Session& s);

// The file the picks are cached in: $TRAINSTEP_CACHE, else
// $XDG_CACHE_HOME/trainstep, else $HOME/.cache/trainstep, then
// kernel-choices.json; "" when none is set.
std::string kernel_choice_cache_path();

// A data-parallel train_step's all-reduce over the profiled steps.
struct AllReduceStats {
  int buckets = 0;
  size_t bytes = 0;           // reduced a step
  double wait_seconds = 0;    // the step waited for (its wait nodes)
  double reduce_seconds = 0;  // on the collective's thread (Collective::reduce_seconds)
};
AllReduceStats all_reduce_stats(const Session& s);

// "arena X MiB (naive Y MiB), state Z MiB, donated N state outputs"
std::string train_memory_summary(const Session& s);
// With a sharded optimizer (Session::shards_optimizer()), the state each
// rank holds against the whole, e.g. "--shard-optimizer: state per rank
// 9.1 / 4.6 MiB (unsharded 13.7 MiB each)"; "" otherwise. A collective:
// every rank calls it, rank 0 gets the line.
std::string shard_memory_summary(const Session& s);
// Where train_step's planned live bytes peak: the node, the live total and
// the largest values live there, one per line.
std::string train_memory_peak(const Session& s);

struct BenchOptions {
  int steps = 50;      // timed
  int warmup = 5;      // untimed, first
  int accumulate = 0;  // > 0: a step is N grad_steps and one apply_grads
  bool profile = false;
};

struct BenchReport {
  std::vector<double> step_ms;  // each timed step's wall time, sorted ascending
  double total_seconds = 0;     // of the timed steps
  std::vector<NodeProfile> profile;  // with profile: train_profile() after the timed steps
};
// Steps on the artifact's golden batch 0.
BenchReport bench(Session& s, const BenchOptions& o);

}  // namespace ts

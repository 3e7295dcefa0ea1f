// Turns a dataset into batches in a seeded, per-epoch shuffled order. The
// order is a pure function of (seed, epoch), so a resumed run sees exactly
// the batches an uninterrupted one would.
#pragma once
#include <cstdint>
#include <vector>

#include "trainstep/dataset.h"
#include "trainstep/tensor.h"

namespace ts {

class Batcher {
 public:
  Batcher(const Dataset& d, int64_t batch);
  const Dataset& dataset() const { return d_; }
  int64_t size() const { return n_; }
  // Full batches per epoch when the last partial batch is dropped.
  int64_t full_batches() const { return n_ / batch_; }
  // Batches per epoch when the last one is padded.
  int64_t padded_batches() const { return (n_ + batch_ - 1) / batch_; }
  void shuffle(uint64_t seed, int64_t epoch);  // Fisher-Yates on splitmix64
  void sequential();                           // identity order (eval)
  // Keeps every world-th sample of the current order from position `rank`
  // on, as torch's DistributedSampler does after its shuffle. `even`: each
  // rank keeps size() / world samples (the tail is dropped), so every rank
  // runs the same number of batches; otherwise the first size() % world
  // ranks keep one more (every sample is kept once: evaluation).
  void shard(int rank, int world, bool even);
  // Throws unless batches fit the model input x and target y.
  void check(const TensorType& x, const TensorType& y) const { d_.check(batch_, x, y); }
  // Fills batch `b` of the current order into x and y. Past the end of the
  // data, rows are zero (padding); returns how many rows are real.
  int64_t fill(int64_t b, const Tensor& x, const Tensor& y) const;

 private:
  const Dataset& d_;
  int64_t n_, batch_;
  std::vector<int64_t> order_;
};

}  // namespace ts

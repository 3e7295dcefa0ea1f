// Turns a dataset into batches in a seeded, per-epoch shuffled order. The
// order is a pure function of (seed, epoch), and so is what a dataset draws
// for each sample (ReadContext), so a resumed run sees exactly the batches
// an uninterrupted one would.
#pragma once
#include <cstdint>
#include <vector>

#include "data/feed.h"
#include "trainstep/dataset.h"
#include "trainstep/tensor.h"

namespace ts {

class Batcher {
 public:
  Batcher(const Dataset& d, int64_t batch);
  int64_t size() const { return n_; }
  // Full batches per epoch when the last partial batch is dropped.
  int64_t full_batches() const { return n_ / batch_; }
  // Batches per epoch when the last one is padded.
  int64_t padded_batches() const { return (n_ + batch_ - 1) / batch_; }
  // Fisher-Yates on splitmix64; reads are training reads of this epoch.
  void shuffle(uint64_t seed, int64_t epoch);
  void sequential();  // identity order, evaluation reads
  // Keeps every world-th sample of the current order from position `rank`
  // on, as torch's DistributedSampler does after its shuffle. `even`: each
  // rank keeps size() / world samples (the tail is dropped), so every rank
  // runs the same number of batches; otherwise the first size() % world
  // ranks keep one more (every sample is kept once: evaluation).
  void shard(int rank, int world, bool even);
  // Fills batch `b` of the current order into rows[k], the batch-major
  // tensor of feed port k, from feed.data (which must be the dataset this
  // batcher orders, or the feed's adapter around it). Past the end of the
  // data, rows are zero (padding); returns how many rows are real.
  int64_t fill(int64_t b, const Feed& feed, const std::vector<Tensor>& rows) const;

 private:
  const Dataset& d_;
  int64_t n_, batch_;
  std::vector<int64_t> order_;
  ReadContext ctx_;
};

}  // namespace ts

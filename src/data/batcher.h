// Turns an image dataset into normalised float batches in a seeded,
// per-epoch shuffled order. The order is a pure function of (seed, epoch),
// so a resumed run sees exactly the batches an uninterrupted one would.
#pragma once
#include <cstdint>
#include <vector>

#include "trainstep/tensor.h"
#include "data/idx.h"

namespace ts {

class Batcher {
 public:
  // Pixels become (x/255 - mean) / std, as torchvision's ToTensor + Normalize.
  Batcher(const ImageDataset& d, int64_t batch, float mean, float std);
  int64_t size() const { return d_.n; }
  // Full batches per epoch when the last partial batch is dropped.
  int64_t full_batches() const { return d_.n / batch_; }
  // Batches per epoch when the last one is padded.
  int64_t padded_batches() const { return (d_.n + batch_ - 1) / batch_; }

  void shuffle(uint64_t seed, int64_t epoch);  // Fisher-Yates on splitmix64
  void sequential();                           // identity order (eval)
  // Fills batch `b` of the current order into x (float32, batch*rows*cols
  // elements in any shape) and y (int64 [batch]). Past the end of the data
  // rows are zero-padded with label 0; returns how many rows are real.
  int64_t fill(int64_t b, const Tensor& x, const Tensor& y) const;

 private:
  const ImageDataset& d_;
  int64_t batch_;
  float lut_[256];
  std::vector<int64_t> order_;
};

}  // namespace ts

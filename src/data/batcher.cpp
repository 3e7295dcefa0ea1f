#include "data/batcher.h"

#include <cstring>

#include "data/splitmix.h"
#include "trainstep/error.h"

namespace ts {

Batcher::Batcher(const Dataset& d, int64_t batch) : d_(d), n_(d.size()), batch_(batch) {
  if (batch <= 0) fail("batch size must be positive, got " + std::to_string(batch));
  sequential();
}

void Batcher::sequential() {
  n_ = d_.size();  // a shard() before is undone
  order_.resize(n_);
  for (int64_t i = 0; i < n_; ++i) order_[i] = i;
  ctx_ = ReadContext{};
}

void Batcher::shuffle(uint64_t seed, int64_t epoch) {
  sequential();
  ctx_ = ReadContext{seed, epoch, true};
  uint64_t s = seed * 0x100000001B3ull + static_cast<uint64_t>(epoch);
  for (int64_t i = n_ - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(splitmix64(s) % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

void Batcher::shard(int rank, int world, bool even) {
  if (world < 1 || rank < 0 || rank >= world)
    fail("bad shard: rank " + std::to_string(rank) + " of " + std::to_string(world));
  const int64_t total = static_cast<int64_t>(order_.size());
  const int64_t keep = even ? total / world : (total - rank + world - 1) / world;
  for (int64_t i = 0; i < keep; ++i) order_[i] = order_[rank + i * world];
  order_.resize(keep);
  n_ = keep;
}

int64_t Batcher::fill(int64_t b, const Feed& feed, const std::vector<Tensor>& rows) const {
  const size_t nports = feed.field.size();
  if (rows.size() != nports) fail("Batcher::fill: " + std::to_string(rows.size()) + " tensors for " + std::to_string(nports) + " ports");
  std::vector<void*> out(feed.nfields, nullptr);
  std::vector<size_t> row_bytes(nports);
  for (size_t k = 0; k < nports; ++k) row_bytes[k] = rows[k].nbytes() / batch_;
  int64_t real = 0;
  for (int64_t r = 0; r < batch_; ++r) {
    const int64_t pos = b * batch_ + r;
    if (pos >= n_) {
      for (size_t k = 0; k < nports; ++k)
        std::memset(static_cast<char*>(rows[k].data) + r * row_bytes[k], 0, row_bytes[k]);
      continue;
    }
    // Two ports on one field: the first is read into, the others copy it.
    for (size_t k = 0; k < nports; ++k) out[feed.field[k]] = nullptr;
    for (size_t k = 0; k < nports; ++k)
      if (!out[feed.field[k]]) out[feed.field[k]] = static_cast<char*>(rows[k].data) + r * row_bytes[k];
    feed.data->read(order_[pos], ctx_, out.data());
    for (size_t k = 0; k < nports; ++k) {
      char* dst = static_cast<char*>(rows[k].data) + r * row_bytes[k];
      if (out[feed.field[k]] != dst) std::memcpy(dst, out[feed.field[k]], row_bytes[k]);
    }
    ++real;
  }
  return real;
}

}  // namespace ts

// Fills the next batches on background threads while the current step
// runs, so input does not stall the step. `threads` workers each fill whole
// batches into a ring of threads + 1 slots; batches are handed out in
// order and are exactly those Batcher::fill would give (each one a pure
// function of its index), with each port's batch dim moved into place, so
// the thread count never changes what a run trains on.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batcher.h"

namespace ts {

class Prefetcher {
 public:
  // feed: the ports (inputs, then targets) and the fields that fill them.
  Prefetcher(const Batcher& b, const Feed& feed, int threads = 1);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Starts filling batches [first, first + count) of the batcher's current
  // order. Call after Batcher::shuffle; stops any run in progress.
  void start(int64_t first, int64_t count);
  // Waits for the next batch; its tensors stay valid until the next call.
  void next();
  // The current batch: the model inputs' tensors and the targets', each in
  // feed order. (make_feed has checked their types against the data.)
  const std::vector<Tensor>& inputs() const { return slots_[cur_].inputs; }
  const std::vector<Tensor>& targets() const { return slots_[cur_].targets; }
  // Real (non-padding) rows of the current batch.
  int64_t real() const { return slots_[cur_].real; }
  // Seconds the caller has waited in next() for a batch since construction.
  double waited() const { return waited_; }
  int threads() const { return static_cast<int>(staging_.size()); }

 private:
  struct Slot {
    std::vector<HostTensor> tensors;  // per port
    std::vector<Tensor> inputs, targets;
    int64_t batch = -1;               // the batch it holds once full
    int64_t real = 0;
    bool full = false;
  };
  void stop();
  void work(int w);
  int64_t fill(int64_t b, Slot& s, int w);

  const Batcher& b_;
  const Feed& feed_;
  std::vector<Slot> slots_;                     // ring: batch k goes to slot k % size
  std::vector<std::vector<HostTensor>> staging_;  // per worker, per port: batch-major, where the batch dim is not 0
  std::vector<std::vector<Tensor>> rows_;         // per worker: what Batcher::fill writes into
  int64_t first_ = 0, end_ = 0;     // the batches of this run
  int64_t claimed_ = 0;             // next batch a worker takes
  int64_t consumed_ = 0;            // batches the caller has taken
  int cur_ = 0;
  bool holding_ = false;            // the caller holds slot cur_
  bool quit_ = false;
  double waited_ = 0;
  std::exception_ptr error_;        // the first worker error, rethrown by next()
  int64_t error_batch_ = -1;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
};

}  // namespace ts

// Fills the next batch on a background thread while the current step runs,
// so input never stalls the step. Two slots, handed out in order; the
// batches are exactly those Batcher::fill would give, in the same order,
// with each port's batch dim moved into place.
#pragma once
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batcher.h"

namespace ts {

class Prefetcher {
 public:
  // feed: the ports (inputs, then targets) and the fields that fill them.
  Prefetcher(const Batcher& b, const Feed& feed);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Starts filling batches [first, first + count) of the batcher's current
  // order. Call after Batcher::shuffle; stops any run in progress.
  void start(int64_t first, int64_t count);
  // Waits for the next batch; its tensors stay valid until the next call.
  void next();
  // The current batch: one tensor per feed port, and the model inputs and
  // the targets apart (the ports in feed order).
  const std::vector<Tensor>& ports() const { return views_[cur_]; }
  const std::vector<Tensor>& inputs() const { return inputs_[cur_]; }
  const std::vector<Tensor>& targets() const { return targets_[cur_]; }
  // Real (non-padding) rows of the current batch.
  int64_t real() const { return real_[cur_]; }
  // Seconds the caller has waited in next() for a batch since construction.
  double waited() const { return waited_; }

 private:
  void stop();
  void work(int64_t first, int64_t count);
  int64_t fill(int64_t b, int slot);

  const Batcher& b_;
  const Feed& feed_;
  std::vector<HostTensor> slot_[2];    // per port
  std::vector<Tensor> views_[2], inputs_[2], targets_[2];
  std::vector<HostTensor> staging_;    // batch-major, for ports whose batch dim is not 0
  std::vector<Tensor> rows_;           // what Batcher::fill writes into (slot or staging)
  int64_t real_[2] = {0, 0};
  bool full_[2] = {false, false};
  int cur_ = 1, next_slot_ = 0;
  bool holding_ = false;  // the caller holds slot cur_
  bool quit_ = false;
  double waited_ = 0;
  std::exception_ptr error_;  // from the worker, rethrown by next()
  std::mutex m_;
  std::condition_variable cv_;
  std::thread t_;
};

}  // namespace ts

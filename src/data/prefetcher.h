// Fills the next batch on a background thread while the current step runs,
// so input never stalls the step. Two slots, handed out in order; the
// batches are exactly those Batcher::fill would give, in the same order.
#pragma once
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "data/batcher.h"

namespace ts {

// t with its dim bd moved to the front: the batch-major layout datasets
// write (fails when bd is not a dim of t).
TensorType batch_major(const TensorType& t, int bd);

class Prefetcher {
 public:
  // x and y: the model input and target types of one batch; x_bd, y_bd:
  // the dim of each that holds the batch (datasets write batch-major rows,
  // which are then moved there).
  Prefetcher(const Batcher& b, const TensorType& x, const TensorType& y, int x_bd = 0,
             int y_bd = 0);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Starts filling batches [first, first + count) of the batcher's current
  // order. Call after Batcher::shuffle; stops any run in progress.
  void start(int64_t first, int64_t count);
  // Waits for the next batch; its tensors stay valid until the next call.
  const HostTensor& x() const { return x_[cur_]; }
  const HostTensor& y() const { return y_[cur_]; }
  void next();
  // Real (non-padding) rows of the current batch.
  int64_t real() const { return real_[cur_]; }

 private:
  void stop();
  void work(int64_t first, int64_t count);

  int64_t fill(int64_t b, int slot);

  const Batcher& b_;
  HostTensor x_[2], y_[2];
  int x_bd_, y_bd_;
  HostTensor x_rows_, y_rows_;  // batch-major staging, where a batch dim is not 0
  int64_t real_[2] = {0, 0};
  bool full_[2] = {false, false};
  int cur_ = 1, next_slot_ = 0;
  bool holding_ = false;  // the caller holds slot cur_
  bool quit_ = false;
  std::exception_ptr error_;  // from the worker, rethrown by next()
  std::mutex m_;
  std::condition_variable cv_;
  std::thread t_;
};

}  // namespace ts

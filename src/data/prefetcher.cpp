#include "data/prefetcher.h"

namespace ts {

Prefetcher::Prefetcher(const Batcher& b, const TensorType& x, const TensorType& y) : b_(b) {
  for (int i = 0; i < 2; ++i) {
    x_[i] = HostTensor(x.dtype, x.shape);
    y_[i] = HostTensor(y.dtype, y.shape);
  }
  b_.fill(0, x_[0].view, y_[0].view);  // type errors surface here, not in the worker
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    quit_ = true;
  }
  cv_.notify_all();
  if (t_.joinable()) t_.join();
  quit_ = false;
  error_ = nullptr;
  holding_ = false;
  full_[0] = full_[1] = false;
  cur_ = 1;
  next_slot_ = 0;
}

void Prefetcher::start(int64_t first, int64_t count) {
  stop();
  t_ = std::thread([this, first, count] { work(first, count); });
}

void Prefetcher::work(int64_t first, int64_t count) {
  for (int64_t b = first; b < first + count; ++b) {
    int slot;
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return quit_ || !full_[next_slot_]; });
      if (quit_) return;
      slot = next_slot_;
    }
    int64_t real = 0;
    try {
      real = b_.fill(b, x_[slot].view, y_[slot].view);  // outside the lock
    } catch (...) {
      std::lock_guard<std::mutex> l(m_);
      error_ = std::current_exception();
      full_[slot] = true;
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> l(m_);
      real_[slot] = real;
      full_[slot] = true;
      next_slot_ = 1 - slot;
    }
    cv_.notify_all();
  }
}

void Prefetcher::next() {
  std::unique_lock<std::mutex> l(m_);
  if (holding_) full_[cur_] = false;  // the caller is done with its batch
  holding_ = true;
  cur_ = 1 - cur_;
  cv_.notify_all();
  cv_.wait(l, [&] { return full_[cur_]; });
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ts

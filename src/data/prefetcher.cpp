#include "data/prefetcher.h"

#include <chrono>
#include <cstring>
#include <string>

#include "trainstep/error.h"

namespace ts {

namespace {

// dst (batch on dim bd) from rows (the same samples batch-major): rows is
// [B, outer..., inner...] and dst [outer..., B, inner...].
void move_batch_dim(const Tensor& rows, const Tensor& dst, int bd) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < bd; ++i) outer *= dst.shape[i];
  for (size_t i = bd + 1; i < dst.shape.size(); ++i) inner *= dst.shape[i];
  const int64_t b = dst.shape[bd];
  const size_t chunk = static_cast<size_t>(inner) * dtype_size(dst.dtype);
  const char* src = static_cast<const char*>(rows.data);
  char* out = static_cast<char*>(dst.data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < b; ++r)
      std::memcpy(out + (o * b + r) * chunk, src + (r * outer + o) * chunk, chunk);
}

}  // namespace

Prefetcher::Prefetcher(const Batcher& b, const Feed& feed) : b_(b), feed_(feed) {
  const size_t n = feed.ports.size();
  staging_.resize(n);
  for (int s = 0; s < 2; ++s) {
    for (size_t k = 0; k < n; ++k) {
      const TensorType& t = feed.ports[k].type;
      slot_[s].emplace_back(t.dtype, t.shape);
      views_[s].push_back(slot_[s][k].view);
      (feed.ports[k].target ? targets_[s] : inputs_[s]).push_back(slot_[s][k].view);
    }
  }
  for (size_t k = 0; k < n; ++k)
    if (feed.ports[k].batch_dim) staging_[k] = HostTensor(feed.rows[k].dtype, feed.rows[k].shape);
  rows_.resize(n);
  fill(0, 0);  // type errors surface here, not in the worker
}

// Batch b into slot `slot`: straight in where the batch is on dim 0, else
// through the batch-major staging tensor. Returns the real rows.
int64_t Prefetcher::fill(int64_t b, int slot) {
  const size_t n = feed_.ports.size();
  for (size_t k = 0; k < n; ++k) {
    rows_[k] = feed_.ports[k].batch_dim ? staging_[k].view : slot_[slot][k].view;
    rows_[k].shape = feed_.rows[k].shape;
  }
  const int64_t real = b_.fill(b, feed_, rows_);
  for (size_t k = 0; k < n; ++k)
    if (feed_.ports[k].batch_dim) move_batch_dim(rows_[k], slot_[slot][k].view, feed_.ports[k].batch_dim);
  return real;
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
      real = fill(b, slot);  // outside the lock
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
  if (!full_[cur_]) {
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(l, [&] { return full_[cur_]; });
    waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ts

#include "data/prefetcher.h"

#include <cstring>
#include <string>

#include "trainstep/error.h"

namespace ts {

TensorType batch_major(const TensorType& t, int bd) {
  if (bd < 0 || bd >= static_cast<int>(t.shape.size()))
    fail("batch dim " + std::to_string(bd) + " is not a dim of " + t.str());
  TensorType r = t;
  r.shape.erase(r.shape.begin() + bd);
  r.shape.insert(r.shape.begin(), t.shape[bd]);
  return r;
}

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

Prefetcher::Prefetcher(const Batcher& b, const TensorType& x, const TensorType& y, int x_bd,
                       int y_bd)
    : b_(b), x_bd_(x_bd), y_bd_(y_bd) {
  for (int i = 0; i < 2; ++i) {
    x_[i] = HostTensor(x.dtype, x.shape);
    y_[i] = HostTensor(y.dtype, y.shape);
  }
  if (x_bd_) x_rows_ = HostTensor(x.dtype, batch_major(x, x_bd_).shape);
  if (y_bd_) y_rows_ = HostTensor(y.dtype, batch_major(y, y_bd_).shape);
  fill(0, 0);  // type errors surface here, not in the worker
}

// Batch b into slot `slot`: straight in where the batch is on dim 0, else
// through the batch-major staging tensor. Returns the real rows.
int64_t Prefetcher::fill(int64_t b, int slot) {
  const Tensor& x = x_bd_ ? x_rows_.view : x_[slot].view;
  const Tensor& y = y_bd_ ? y_rows_.view : y_[slot].view;
  const int64_t real = b_.fill(b, x, y);
  if (x_bd_) move_batch_dim(x, x_[slot].view, x_bd_);
  if (y_bd_) move_batch_dim(y, y_[slot].view, y_bd_);
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
  cv_.wait(l, [&] { return full_[cur_]; });
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ts

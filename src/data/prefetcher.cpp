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

Prefetcher::Prefetcher(const Batcher& b, const Feed& feed, int threads) : b_(b), feed_(feed) {
  if (threads < 1) fail("data threads must be at least 1, got " + std::to_string(threads));
  const size_t n = feed.ports.size();
  slots_.resize(static_cast<size_t>(threads) + 1);
  for (Slot& s : slots_) {
    for (size_t k = 0; k < n; ++k) {
      const TensorType& t = feed.ports[k].type;
      s.tensors.emplace_back(t.dtype, t.shape);
    }
    for (size_t k = 0; k < n; ++k)  // after the vector stopped moving
      (feed.ports[k].target ? s.targets : s.inputs).push_back(s.tensors[k].view);
  }
  staging_.resize(static_cast<size_t>(threads));
  rows_.assign(static_cast<size_t>(threads), std::vector<Tensor>(n));
  for (auto& st : staging_) {
    st.resize(n);
    for (size_t k = 0; k < n; ++k)
      if (feed.ports[k].batch_dim) st[k] = HostTensor(feed.rows[k].dtype, feed.rows[k].shape);
  }
}

// Batch b into slot s with worker w's staging: straight in where the batch
// is on dim 0, else through the batch-major staging tensor. Returns the
// real rows.
int64_t Prefetcher::fill(int64_t b, Slot& s, int w) {
  const size_t n = feed_.ports.size();
  std::vector<Tensor>& rows = rows_[w];
  for (size_t k = 0; k < n; ++k) {
    rows[k] = feed_.ports[k].batch_dim ? staging_[w][k].view : s.tensors[k].view;
    rows[k].shape = feed_.rows[k].shape;
  }
  const int64_t real = b_.fill(b, feed_, rows);
  for (size_t k = 0; k < n; ++k)
    if (feed_.ports[k].batch_dim) move_batch_dim(rows[k], s.tensors[k].view, feed_.ports[k].batch_dim);
  return real;
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    quit_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  quit_ = false;
  error_ = nullptr;
  error_batch_ = -1;
  holding_ = false;
  for (Slot& s : slots_) s.full = false;
}

void Prefetcher::start(int64_t first, int64_t count) {
  stop();
  first_ = claimed_ = consumed_ = first;
  end_ = first + count;
  for (int w = 0; w < threads(); ++w) workers_.emplace_back([this, w] { work(w); });
}

// Takes the next unclaimed batch, waits for its slot to be free (the
// caller has moved past the batch that held it), fills it outside the lock.
void Prefetcher::work(int w) {
  const int64_t ring = static_cast<int64_t>(slots_.size());
  for (;;) {
    int64_t b;
    {
      std::unique_lock<std::mutex> l(m_);
      if (quit_ || claimed_ >= end_ || error_) return;
      b = claimed_++;
      // Slot b % ring last held batch b - ring: free once the caller has
      // released it (batches below consumed_ are released).
      cv_.wait(l, [&] { return quit_ || b - ring < consumed_; });
      if (quit_) return;
    }
    Slot& s = slots_[static_cast<size_t>(b % ring)];
    int64_t real = 0;
    std::exception_ptr err;
    try {
      real = fill(b, s, w);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> l(m_);
      if (err && (!error_ || b < error_batch_)) {
        error_ = err;
        error_batch_ = b;
      }
      s.batch = b;
      s.real = real;
      s.full = true;
    }
    cv_.notify_all();
  }
}

void Prefetcher::next() {
  std::unique_lock<std::mutex> l(m_);
  const int64_t ring = static_cast<int64_t>(slots_.size());
  if (holding_) {  // the caller is done with its batch
    slots_[static_cast<size_t>(cur_)].full = false;
    ++consumed_;
  }
  holding_ = true;
  const int64_t b = consumed_;
  cur_ = static_cast<int>(b % ring);
  cv_.notify_all();
  auto ready = [&] {
    const Slot& s = slots_[static_cast<size_t>(cur_)];
    return (s.full && s.batch == b) || (error_ && error_batch_ <= b);
  };
  if (!ready()) {
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(l, ready);
    waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (error_ && error_batch_ <= b) std::rethrow_exception(error_);
}

}  // namespace ts

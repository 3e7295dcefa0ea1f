// Collective over MPI_COMM_WORLD. One thread of ours makes every MPI call
// (MPI_THREAD_FUNNELED is all it needs): the step's kernels hand it
// reductions and go on computing, which is the overlap; it drives each
// non-blocking collective to completion by testing it, sleeping a little
// between tests so that on a machine with as many ranks as cores it does not
// take a core from the compute.
//
// Who did not answer: as each rank starts collective k, and then every
// heartbeat interval while it drives k, it tells every other rank so (a
// small message on a private communicator). A rank whose wait times out
// names the ranks it has not heard from lately (dead, stopped, or stuck
// outside any collective), and says so when all of them are still there.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "trainstep/collective.h"
#include "trainstep/error.h"

namespace ts {

namespace {

using clock_type = std::chrono::steady_clock;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    case DType::U8:
    case DType::Bool: return MPI_UINT8_T;
    case DType::BF16: fail("MPI: bfloat16 tensors are not reduced over ranks (their gradients reach the all-reduce as float32)");
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, static_cast<size_t>(n));
}

constexpr int kArriveTag = 7;
constexpr size_t kRing = 1024;  // requests in flight at once (a step's buckets)

class MpiCollective final : public Collective {
 public:
  explicit MpiCollective(const MpiOptions& o) : timeout_(o.timeout_s) {
    if (!(timeout_ > 0)) fail("--collective-timeout must be positive");
    t_ = std::thread([this] { serve(); });
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [this] { return ready_; });
    if (!error_.empty()) {
      l.unlock();
      t_.join();
      fail(error_);
    }
  }

  ~MpiCollective() override {
    {
      std::lock_guard<std::mutex> l(m_);
      quit_ = true;
    }
    cv_.notify_all();
    // After a timeout the thread may be stuck in a collective that will
    // never finish; the process is on its way out with an error anyway.
    if (broken_) t_.detach();
    else t_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request all_reduce(void* buf, size_t count, DType dtype, ReduceOp op, const char* what) override {
    return submit({Job::Reduce, buf, count, dtype, op, 0, what, 0, nullptr});
  }

  Request reduce_scatter(void* buf, const size_t* counts, DType dtype, ReduceOp op,
                         const char* what) override {
    return submit({Job::ReduceScatter, buf, 0, dtype, op, 0, what, 0, counts});
  }

  Request all_gather(void* buf, const size_t* counts, DType dtype, const char* what) override {
    return submit({Job::AllGather, buf, 0, dtype, ReduceOp::Sum, 0, what, 0, counts});
  }

  void broadcast(void* buf, size_t bytes, int root, const char* what) override {
    if (root < 0 || root >= size_) fail(std::string(what) + ": broadcast from rank " +
                                        std::to_string(root) + " of " + std::to_string(size_));
    wait(submit({Job::Bcast, buf, bytes, DType::U8, ReduceOp::Sum, root, what, 0, nullptr}));
  }

  void wait(Request r) override {
    std::unique_lock<std::mutex> l(m_);
    const auto deadline = clock_type::now() + std::chrono::duration<double>(timeout_);
    while (done_ < r) {
      if (!error_.empty()) throw CollectiveError(error_);
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && done_ < r && error_.empty()) {
        broken_ = true;
        throw CollectiveError(timeout_message(r));
      }
    }
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    // MPI_Abort from this thread, once the MPI thread has stopped calling
    // MPI (two threads in MPI at once could crash the teardown). It stops
    // within a test of its collective; if it is stuck inside one, go on.
    halt_ = true;
    cv_.notify_all();
    const auto until = clock_type::now() + std::chrono::seconds(1);
    while (!halted_ && clock_type::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; if it did, still end
  }

  double reduce_seconds() const override { return reduce_seconds_.load(); }
  void reset_reduce_seconds() override { reduce_seconds_ = 0; }

 private:
  struct Job {
    enum Kind { Reduce, Bcast, ReduceScatter, AllGather } kind;
    void* buf;
    size_t count;
    DType dtype;
    ReduceOp op;
    int root;
    const char* what;
    Request id;
    const size_t* counts;  // per rank (ReduceScatter, AllGather)
  };

  Request submit(Job j) {
    std::unique_lock<std::mutex> l(m_);
    if (!error_.empty()) throw CollectiveError(error_);
    // The ring holds every request not yet waited for; a step has a
    // handful (its buckets), so a full ring is a caller that never waits.
    if (next_ - done_ > static_cast<Request>(kRing))
      fail(std::string(j.what) + ": more than " + std::to_string(kRing) +
           " collectives started and not finished");
    j.id = next_++;
    ring_[static_cast<size_t>(j.id) % kRing] = j;
    l.unlock();
    cv_.notify_all();
    return j.id;
  }

  std::string timeout_message(Request r) const {
    // r is not done, so its ring slot has not been reused.
    const char* what = ring_[static_cast<size_t>(r) % kRing].what;
    std::string missing;
    int n = 0;
    const auto quiet_since = clock_type::now() - 3 * heartbeat();
    for (int k = 0; k < size_; ++k)
      if (k != rank_ && (arrived_[k] < r || heard_[k] < quiet_since))
        missing += (n++ ? ", " : "") + std::to_string(k);
    std::string who =
        n ? "rank" + std::string(n > 1 ? "s " : " ") + missing + " did not answer"
          : "every rank is there and started it, but it did not complete";
    return std::string(what) + ": no result within " + std::to_string(int(timeout_)) +
           " s (--collective-timeout): " + who + " (this is rank " + std::to_string(rank_) +
           " of " + std::to_string(size_) + ")";
  }

  // The MPI thread.
  void serve() {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(MPI_COMM_WORLD, &world_);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(MPI_COMM_WORLD, &arrivals_);
    if (rc == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(arrivals_, MPI_ERRORS_RETURN);
      MPI_Comm_rank(world_, &rank_);
      MPI_Comm_size(world_, &size_);
      arrived_.assign(static_cast<size_t>(size_), -1);
      heard_.assign(static_cast<size_t>(size_), clock_type::time_point::min());
      sends_.reserve(kRing);
      counts_.assign(static_cast<size_t>(size_), 0);
      displs_.assign(static_cast<size_t>(size_), 0);
    }
    {
      std::lock_guard<std::mutex> l(m_);
      if (rc != MPI_SUCCESS) error_ = "MPI_Init_thread failed: " + mpi_error(rc);
      ready_ = true;
    }
    cv_.notify_all();
    if (rc != MPI_SUCCESS) return;

    Request next = 0;
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return quit_ || halt_ || next_ > next; });
        if (halt_) break;
        if (next_ <= next) break;  // quit, nothing pending
        j = ring_[static_cast<size_t>(next) % kRing];
      }
      std::string err = run(j);
      if (halt_) break;
      {
        std::lock_guard<std::mutex> l(m_);
        if (err.empty()) done_ = j.id;
        else error_ = err;
      }
      cv_.notify_all();
      if (!err.empty()) return;  // later collectives cannot line up any more
      ++next;
    }
    if (halt_) {
      halted_ = true;
      return;
    }
    finish();
  }

  std::string run(const Job& j) {
    announce(j.id);
    const auto t0 = clock_type::now();
    MPI_Request req;
    int rc = start(j, &req);
    if (rc == MPI_SUCCESS) rc = drive(req, j.id);
    // MPI's in-place reduce-scatter leaves this rank's chunk at the start
    // of the buffer; the interface (NCCL's) has it in its own place.
    if (rc == MPI_SUCCESS && j.kind == Job::ReduceScatter && rank_ > 0) {
      const size_t el = dtype_size(j.dtype);
      char* b = static_cast<char*>(j.buf);
      std::memmove(b + size_t(displs_[size_t(rank_)]) * el, b, size_t(counts_[size_t(rank_)]) * el);
    }
    if (j.kind != Job::Bcast)
      reduce_seconds_ = reduce_seconds_.load() +
                        std::chrono::duration<double>(clock_type::now() - t0).count();
    if (rc != MPI_SUCCESS)
      return std::string(j.what) + ": MPI failed (rank " + std::to_string(rank_) + "): " +
             mpi_error(rc);
    return "";
  }

  int start(const Job& j, MPI_Request* req) {
    if (j.counts) {  // counts_ and displs_ stay put until the request completes
      int at = 0;
      for (size_t k = 0; k < counts_.size(); ++k) {
        counts_[k] = static_cast<int>(j.counts[k]);
        displs_[k] = at;
        at += counts_[k];
      }
    }
    switch (j.kind) {
      case Job::Reduce:
        return MPI_Iallreduce(MPI_IN_PLACE, j.buf, static_cast<int>(j.count), mpi_type(j.dtype),
                              mpi_op(j.op), world_, req);
      case Job::ReduceScatter:
        return MPI_Ireduce_scatter(MPI_IN_PLACE, j.buf, counts_.data(), mpi_type(j.dtype),
                                   mpi_op(j.op), world_, req);
      case Job::AllGather:
        return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, j.buf, counts_.data(),
                               displs_.data(), mpi_type(j.dtype), world_, req);
      case Job::Bcast:
        return MPI_Ibcast(j.buf, static_cast<int>(j.count), MPI_BYTE, j.root, world_, req);
    }
    return MPI_ERR_OTHER;
  }

  // Between heartbeats while a collective is driven.
  std::chrono::duration<double> heartbeat() const {
    return std::chrono::duration<double>(std::min(1.0, timeout_ / 8));
  }

  // Tests `req` (collective `id`) until it completes, reading arrival
  // notices and sending heartbeats meanwhile. Returns early, with
  // MPI_ERR_OTHER, when abort() asks this thread to make no more calls.
  int drive(MPI_Request& req, Request id) {
    int spins = 0;
    auto beat = clock_type::now();
    for (;;) {
      if (halt_) return MPI_ERR_OTHER;
      int flag = 0;
      int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) return rc;
      drain_arrivals();
      if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (id >= 0 && clock_type::now() - beat > heartbeat()) {
        announce(id);
        beat = clock_type::now();
      }
    }
  }

  // Tells every other rank that this one started collective `id`.
  void announce(Request id) {
    if (size_ == 1) return;
    // Completed sends leave the list; their slots are reused.
    size_t keep = 0;
    for (size_t i = 0; i < sends_.size(); ++i) {
      int flag = 0;
      MPI_Test(&sends_[i].req, &flag, MPI_STATUS_IGNORE);
      if (!flag) sends_[keep++] = sends_[i];
    }
    sends_.resize(keep);
    for (int k = 0; k < size_; ++k) {
      if (k == rank_) continue;
      if (sends_.size() == sends_.capacity()) {  // never grows past kRing
        MPI_Wait(&sends_.front().req, MPI_STATUS_IGNORE);
        sends_.erase(sends_.begin());
      }
      sends_.push_back({MPI_REQUEST_NULL, id});
      // The value lives in sends_ until the send completes (no reallocation:
      // the capacity is fixed above).
      MPI_Isend(&sends_.back().value, 1, MPI_INT64_T, k, kArriveTag, arrivals_,
                &sends_.back().req);
    }
  }

  void drain_arrivals() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kArriveTag, arrivals_, &flag, &st) != MPI_SUCCESS || !flag)
        return;
      int64_t v = 0;
      MPI_Recv(&v, 1, MPI_INT64_T, st.MPI_SOURCE, kArriveTag, arrivals_, MPI_STATUS_IGNORE);
      std::lock_guard<std::mutex> l(m_);
      const size_t src = static_cast<size_t>(st.MPI_SOURCE);
      arrived_[src] = std::max(arrived_[src], v);
      heard_[src] = clock_type::now();
    }
  }

  // Every rank's notices are sent and read before MPI goes away.
  void finish() {
    for (auto& s : sends_) MPI_Wait(&s.req, MPI_STATUS_IGNORE);
    MPI_Request req;
    if (MPI_Ibarrier(arrivals_, &req) == MPI_SUCCESS) drive(req, -1);
    drain_arrivals();
    MPI_Comm_free(&arrivals_);
    MPI_Comm_free(&world_);
    MPI_Finalize();
  }

  struct Send {
    MPI_Request req;
    int64_t value;
  };

  double timeout_;
  std::thread t_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool ready_ = false, quit_ = false;
  std::atomic<bool> broken_{false};
  std::string error_;  // an MPI call failed: every later call throws it
  Job ring_[kRing];
  Request next_ = 0, done_ = -1;
  int rank_ = 0, size_ = 1;
  std::vector<int64_t> arrived_;  // per rank: the last collective it started
  std::vector<clock_type::time_point> heard_;  // per rank: its last notice
  std::atomic<bool> halt_{false};  // abort(): the MPI thread makes no more calls
  std::atomic<bool> halted_{false};
  std::vector<Send> sends_;       // MPI thread only
  std::vector<int> counts_, displs_;  // the running job's chunks (MPI thread only)
  std::atomic<double> reduce_seconds_{0};
  MPI_Comm world_ = MPI_COMM_NULL, arrivals_ = MPI_COMM_NULL;
};

}  // namespace

bool have_mpi() { return true; }

std::shared_ptr<Collective> mpi_collective(const MpiOptions& o) {
  // MPI starts once per process; every caller shares it.
  static std::mutex m;
  static std::weak_ptr<Collective> one;
  std::lock_guard<std::mutex> l(m);
  if (auto c = one.lock()) return c;
  static bool finalized = false;
  if (finalized) fail("MPI was already finalized in this process; keep the collective alive");
  auto c = std::shared_ptr<Collective>(new MpiCollective(o), [](Collective* p) {
    delete p;
    finalized = true;
  });
  one = c;
  return c;
}

}  // namespace ts

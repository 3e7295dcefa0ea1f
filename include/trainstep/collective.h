// Collectives for data-parallel training: the few operations a training
// step and its loop need across ranks, shaped like NCCL's (buffer, count,
// dtype, op, and a request to wait on), so a GPU implementation can stand
// behind the same interface. trainstep ships one over MPI (mpi_collective);
// tests and single-process runs need none.
//
// Order: every rank must issue the same collectives in the same order (the
// compiled step does: all ranks run the same schedule). Requests complete in
// the order they were started.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "trainstep/dtype.h"
#include "trainstep/error.h"

namespace ts {

enum class ReduceOp { Sum, Max, Min };

// A collective that failed or timed out (a rank died or hangs): the run
// cannot go on, and the other ranks learn of it only through their own
// timeouts.
struct CollectiveError : Error {
  using Error::Error;
};

class Collective {
 public:
  using Request = int64_t;
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts reducing `count` elements of `buf` over all ranks, in place;
  // returns at once. `buf` must stay untouched until wait(request).
  // `what` names the operation in errors (e.g. the node) and must outlive
  // the request; starting one allocates nothing.
  virtual Request all_reduce(void* buf, size_t count, DType dtype, ReduceOp op,
                             const char* what) = 0;
  // Starts a reduce-scatter of `buf`, in place, as NCCL's in-place
  // ncclReduceScatter does: `buf` holds size() chunks, chunk k `counts[k]`
  // elements long (k = 0, 1, ... in order), and this rank's chunk of the
  // reduction over the ranks lands in its own place (after chunks 0 ..
  // rank()-1); the other chunks are left undefined. `counts` has size()
  // entries, equal on every rank, and must outlive the request; NCCL's
  // equal-count form is the case of equal entries.
  virtual Request reduce_scatter(void* buf, const size_t* counts, DType dtype, ReduceOp op,
                                 const char* what) = 0;
  // Starts an all-gather in place: each rank's chunk of `buf` (laid out as
  // for reduce_scatter) lands in the same place in every rank's `buf`.
  virtual Request all_gather(void* buf, const size_t* counts, DType dtype, const char* what) = 0;
  // Blocks until the request has completed. Throws CollectiveError naming
  // `what` and the ranks that did not answer when it takes longer than the
  // timeout.
  virtual void wait(Request r) = 0;
  // Blocking: rank `root`'s `bytes` at `buf` land in every rank's `buf`.
  virtual void broadcast(void* buf, size_t bytes, int root, const char* what) = 0;
  // Seconds spent inside the collectives started by all_reduce,
  // reduce_scatter and all_gather (summed over requests) since the last
  // reset, for profiles: the part the caller did
  // not wait for was hidden behind its own work.
  virtual double reduce_seconds() const = 0;
  virtual void reset_reduce_seconds() = 0;
  // Ends every rank's process now with exit status `code`: after an error
  // on this rank that the others cannot learn of (they would wait for its
  // next collective until their timeout).
  [[noreturn]] virtual void abort(int code) = 0;

  // Blocking conveniences on top of the above.
  void all_reduce_now(void* buf, size_t count, DType dtype, ReduceOp op, const char* what) {
    wait(all_reduce(buf, count, dtype, op, what));
  }
  double sum(double v, const char* what);
  int64_t max(int64_t v, const char* what);
  // Whether every rank passed the same v.
  bool same_everywhere(int64_t v, const char* what) { return max(v, what) == -max(-v, what); }
  std::string broadcast_string(const std::string& s, int root, const char* what);
};

struct MpiOptions {
  // A collective not done after this many seconds fails on every rank that
  // is waiting for it (see Collective::wait).
  double timeout_s = 300;
};

// Whether this build has MPI (cmake -DTRAINSTEP_WITH_MPI).
bool have_mpi();
// Initialises MPI (once per process; MPI_Finalize runs when the last
// reference goes) and returns MPI_COMM_WORLD as a Collective. Rank and size
// come from MPI itself. Throws ts::Error when the build has no MPI.
std::shared_ptr<Collective> mpi_collective(const MpiOptions& o = {});

// How the compiled step groups gradients into all-reduces, as PyTorch DDP
// does: in reverse parameter order (roughly the order the backward makes
// them), a small first bucket so communication starts early, then buckets
// up to a cap.
struct BucketOptions {
  size_t first_bytes = size_t(1) << 20;  // DDP: 1 MiB
  size_t cap_bytes = size_t(25) << 20;   // DDP: 25 MiB (bucket_cap_mb)
  // Start each bucket's reduction as soon as its gradients exist, while
  // the rest of the backward runs. Off: every reduction runs at the end of
  // the backward, blocking (to measure what overlap hides).
  bool overlap = true;
};

}  // namespace ts

// Parallel loops that skip the OpenMP construct when it would run on one
// thread. libgomp allocates and frees a team in GOMP_parallel for every
// region that runs with one thread (an `if` clause that is false, one thread
// in total, or a nested region when nesting is off); it caches only teams of
// more than one thread. The step path must not allocate, so kernels use these
// helpers instead of `#pragma omp parallel ... if (...)`.
//
// The serial path runs the same body in the same order as a one-thread team
// would, so results do not depend on which path ran.
#pragma once
#include <omp.h>

#include <cstdint>

namespace ts {

// True when a parallel region started here asking for nthreads threads could
// get more than one (nested regions get one when nesting is off).
inline bool omp_can_fork(int nthreads) {
  return nthreads > 1 && omp_get_active_level() < omp_get_max_active_levels();
}
inline bool omp_can_fork() { return omp_can_fork(omp_get_max_threads()); }

// for (i = 0; i < n; ++i) body(i), under `omp parallel for schedule(static)`
// when `parallel` holds and a team of more than one thread is possible.
template <class F>
inline void parallel_for(int64_t n, bool parallel, F&& body) {
  if (parallel && omp_can_fork()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}
// A threshold passed where the condition belongs would convert silently.
template <class F>
void parallel_for(int64_t n, int64_t min_parallel, F&& body) = delete;

// body(t, nt) on each thread t of a team of nt threads (`omp parallel`
// num_threads(nthreads), or omp_get_max_threads() when nthreads is 0), or
// body(0, 1) on the calling thread when `parallel` does not hold or one
// thread is all there would be.
template <class F>
inline void parallel_region(bool parallel, F&& body, int nthreads = 0) {
  const int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
  if (parallel && omp_can_fork(nt)) {
#pragma omp parallel num_threads(nt)
    body(omp_get_thread_num(), omp_get_num_threads());
  } else {
    body(0, 1);
  }
}

// The part [begin, end) of [0, n) that thread t of nt takes: contiguous,
// in thread order, sizes differing by at most one.
inline void split_range(int64_t n, int t, int nt, int64_t& begin, int64_t& end) {
  begin = n * t / nt;
  end = n * (t + 1) / nt;
}

}  // namespace ts

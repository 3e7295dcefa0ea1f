// ts::bench: `trainstep bench`'s timed loop.
#include <algorithm>
#include <chrono>

#include "runtime/artifact.h"
#include "trainstep/bench.h"

namespace ts {

BenchReport bench(Session& s, const BenchOptions& o) {
  using clock = std::chrono::steady_clock;
  const Artifact::Batch b0 = s.artifact().golden_batch(0);
  const std::vector<Tensor>& xs = b0.inputs;
  const std::vector<Tensor>& y = b0.targets;
  auto step = [&] {
    if (o.accumulate == 0) return s.train_step(xs, y);
    float l = 0;
    for (int k = 0; k < o.accumulate; ++k) l += s.grad_step(xs, y);
    s.apply_grads();
    return l / o.accumulate;
  };
  for (int i = 0; i < o.warmup; ++i) step();
  s.set_profiling(o.profile);
  if (s.collective()) s.collective()->reset_reduce_seconds();
  BenchReport r;
  r.step_ms.reserve(o.steps);  // the timed loop allocates nothing
  for (int i = 0; i < o.steps; ++i) {
    auto t = clock::now();
    step();
    const double d = std::chrono::duration<double>(clock::now() - t).count();
    r.total_seconds += d;
    r.step_ms.push_back(1e3 * d);
  }
  std::sort(r.step_ms.begin(), r.step_ms.end());
  if (o.profile) r.profile = train_profile(s);
  return r;
}

}  // namespace ts

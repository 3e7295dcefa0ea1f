#include "dist/replicas.h"

#include <functional>

#include "io/checksum.h"
#include "trainstep/error.h"

namespace ts {

int64_t rank_seed(int64_t seed, int rank) {
  if (rank == 0) return seed;
  uint64_t z = static_cast<uint64_t>(seed) + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 1);
}

void check_same_model(Collective& c, const Program& p, int64_t batch, const std::string& artifact) {
  std::string key = p.name + "/" + std::to_string(batch);
  for (const auto& s : p.state) key += "/" + s.name + ":" + s.type.str();
  const int64_t h = static_cast<int64_t>(std::hash<std::string>()(key) >> 1);
  if (!c.same_everywhere(h, "the artifact check"))
    fail(artifact + ": the ranks loaded different models, state layouts or batch sizes "
         "(rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) + ")");
}

void broadcast_replica(Collective& c, int root, const std::vector<Tensor*>& tensors,
                       ReplicaCounters& n) {
  for (Tensor* t : tensors) c.broadcast(t->data, t->nbytes(), root, "the state broadcast");
  int64_t ints[3] = {n.step, n.seed, n.skipped};
  c.broadcast(ints, sizeof ints, root, "the state broadcast");
  c.broadcast(&n.lr, sizeof n.lr, root, "the state broadcast");
  n.step = ints[0];
  n.seed = ints[1];
  n.skipped = ints[2];
}

void check_replicated(Collective& c, const std::vector<const Tensor*>& tensors, int64_t step) {
  Checksummer h;
  for (const Tensor* t : tensors) h.update(t->data, t->nbytes());
  const int64_t v = static_cast<int64_t>(std::stoull(h.hex(), nullptr, 16) >> 1);
  if (!c.same_everywhere(v, "the replica check"))
    fail("step " + std::to_string(step) + ": the ranks' parameters or optimizer state differ: "
         "the replicas diverged (ranks run with different options, or a reduction gave ranks "
         "different bits)");
}

}  // namespace ts

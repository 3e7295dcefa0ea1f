#include "passes/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "ir/rewrite.h"

namespace ts {

namespace {

constexpr size_t kSmallBytes = 4096;

}  // namespace

void schedule_updates_early(Function& f) {
  const int n = static_cast<int>(f.nodes.size());
  const auto readers = consumers(f);

  std::vector<bool> eager(n, false);
  for (int i = n - 1; i >= 0; --i) {
    bool sink = true, small = true, readers_eager = true;
    for (int v : f.nodes[i].outputs) {
      if (v < 0) continue;
      sink = sink && readers[v].empty();
      small = small && f.value_types[v].nbytes() <= kSmallBytes;
      for (int r : readers[v]) readers_eager = readers_eager && eager[r];
    }
    eager[i] = readers_eager && (sink || small);
    // Communication starts as soon as it can, and its wait stays where the
    // trace put it (after the backward), so the two bracket the compute
    // the communication hides behind.
    if (f.nodes[i].def->comm == CommRole::Start) eager[i] = true;
    if (f.nodes[i].def->comm == CommRole::Wait) eager[i] = false;
  }

  // Operands, plus for a sink the other readers of the state it overwrites.
  std::vector<std::vector<int>> deps(n);
  for (int i = 0; i < n; ++i)
    for (int v : f.nodes[i].inputs)
      if (v >= 0 && f.producer[v] >= 0) deps[i].push_back(f.producer[v]);
  for (const Port& o : f.outputs) {
    const int t = f.producer[o.value];
    if (o.role != Role::State || t < 0 || !eager[t]) continue;
    const int in = f.find_input(Role::State, o.state);
    if (in < 0) continue;
    for (int r : readers[f.inputs[in].value])
      if (r != t) deps[t].push_back(r);
  }
  std::vector<std::vector<int>> dependents(n);
  std::vector<int> waiting(n, 0);
  for (int i = 0; i < n; ++i) {
    std::sort(deps[i].begin(), deps[i].end());
    deps[i].erase(std::unique(deps[i].begin(), deps[i].end()), deps[i].end());
    waiting[i] = static_cast<int>(deps[i].size());
    for (int d : deps[i]) dependents[d].push_back(i);
  }

  std::vector<int> order;
  // Ready eager nodes, the earliest in the trace first.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  std::vector<bool> done(n, false);
  auto place = [&](int i) {
    done[i] = true;
    order.push_back(i);
    for (int d : dependents[i])
      if (--waiting[d] == 0 && eager[d]) ready.push(d);
  };
  auto drain = [&] {
    while (!ready.empty()) {
      const int i = ready.top();
      ready.pop();
      if (!done[i]) place(i);
    }
  };
  for (int i = 0; i < n; ++i)
    if (eager[i] && waiting[i] == 0) ready.push(i);
  drain();
  // Non-eager nodes read only non-eager results (or a communication
  // start, placed once its own operands were), so in their own order their
  // operands are always placed.
  for (int i = 0; i < n; ++i)
    if (!eager[i]) {
      place(i);
      drain();
    }
  // Eager nodes left waiting on each other's state reads (a cycle no
  // donation can satisfy): their original order is valid.
  for (int i = 0; i < n; ++i)
    if (!done[i]) place(i);

  std::vector<Node> nodes;
  nodes.reserve(n);
  for (int i : order) nodes.push_back(std::move(f.nodes[i]));
  f.nodes = std::move(nodes);
  compact(f);  // recomputes producers and re-verifies
}

}  // namespace ts

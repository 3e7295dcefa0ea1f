#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace ts {

namespace {

constexpr size_t kAlign = 64;

// Every slot gets at least one aligned block, so that a live value of zero
// bytes still has its own non-null pointer (nullptr means "unused" to kernels).
size_t slot_bytes(const TensorType& t) {
  return std::max(kAlign, (t.nbytes() + kAlign - 1) / kAlign * kAlign);
}

}  // namespace

MemoryPlan plan_memory(const Function& f, bool inplace, bool donate) {
  const size_t nv = f.value_names.size();
  const int end = static_cast<int>(f.nodes.size());
  MemoryPlan p;
  p.root.resize(nv);
  std::iota(p.root.begin(), p.root.end(), 0);
  p.live.assign(nv, false);
  p.offset.assign(nv, MemoryPlan::kNoSlot);
  p.size.assign(nv, 0);
  p.first.assign(nv, -1);
  p.last.assign(nv, -1);

  // Producers and alias roots, in schedule order (a view's base is resolved
  // before the view).
  std::vector<int> producer(nv, -1);
  for (int i = 0; i < end; ++i) {
    const Node& n = f.nodes[i];
    for (int v : n.outputs)
      if (v >= 0) producer[v] = i;
    if (n.def->alias_input0 && !n.outputs.empty() && n.outputs[0] >= 0)
      p.root[n.outputs[0]] = p.root[n.inputs.at(0)];
  }
  for (size_t v = 0; v < nv; ++v) p.first[v] = producer[v];

  // Reads by kernels (alias nodes run none) and by the caller (outputs)
  // extend the root's lifetime.
  for (int i = 0; i < end; ++i) {
    const Node& n = f.nodes[i];
    if (n.def->alias_input0) continue;
    for (int v : n.inputs)
      if (v >= 0) p.last[p.root[v]] = std::max(p.last[p.root[v]], i);
  }
  for (const auto& o : f.outputs) p.last[p.root[o.value]] = end;
  for (size_t v = 0; v < nv; ++v) p.live[v] = p.last[p.root[v]] >= 0;

  if (inplace && donate) {
    std::vector<bool> taken(nv, false);  // state inputs already donated
    for (size_t oi = 0; oi < f.outputs.size(); ++oi) {
      const Port& o = f.outputs[oi];
      if (o.role != Role::State) continue;
      int ii = f.find_input(Role::State, o.state);
      if (ii < 0) continue;
      const int w = f.inputs[ii].value, w2 = o.value;
      const int at = producer[w2];
      if (w2 == w || at < 0 || p.root[w2] != w2 || p.root[w] != w || taken[w]) continue;
      if (f.value_types[w2] != f.value_types[w]) continue;
      if (std::count_if(f.outputs.begin(), f.outputs.end(),
                        [&](const Port& q) { return q.value == w2; }) != 1)
        continue;
      // The old value (with its views) is dead after the producing node and is
      // not an output (an output's lifetime runs to `end`).
      if (p.last[w] > at) continue;
      const Node& n = f.nodes[at];
      bool safe = true;
      for (int u : n.inputs)
        if (u >= 0 && p.root[u] == w)
          safe = safe && n.def->same_index && f.value_types[u] == f.value_types[w2];
      if (!safe) continue;
      taken[w] = true;
      p.donated.push_back(static_cast<int>(oi));
      // The output and its views now live in the input's buffer.
      for (size_t v = 0; v < nv; ++v)
        if (p.root[v] == w2) p.root[v] = w;
      p.last[w] = std::max(p.last[w], p.last[w2]);
      p.last[w2] = -1;
    }
  }

  // In-place intermediates: a same_index node may write an output over an
  // arena value of the same type that dies at that node (e.g. relu-backward
  // over the incoming gradient), as eager PyTorch's in-place ops do; a node
  // whose op names overwrites_input may write output 0 over that input.
  if (inplace) {
    std::vector<int> claimed;  // roots already reused at the current node
    auto reusable = [&](int i, int u, int w2) {
      if (u < 0) return -1;
      const int r = p.root[u];
      if (producer[r] < 0 || p.last[r] != i || r == w2) return -1;
      if (std::find(claimed.begin(), claimed.end(), r) != claimed.end()) return -1;
      if (f.value_types[r].nbytes() != f.value_types[w2].nbytes()) return -1;
      return r;
    };
    auto reuse = [&](int r, int w2) {
      claimed.push_back(r);
      for (size_t v = 0; v < nv; ++v)
        if (p.root[v] == w2) p.root[v] = r;
      p.last[r] = p.last[w2];
      p.last[w2] = -1;
    };
    for (int i = 0; i < end; ++i) {
      const Node& n = f.nodes[i];
      claimed.clear();
      const int k = n.def->overwrites_input;
      if (k >= 0 && k < static_cast<int>(n.inputs.size()) && !n.outputs.empty()) {
        const int w2 = n.outputs[0];
        if (w2 >= 0 && p.root[w2] == w2 && p.last[w2] >= 0) {
          const int r = reusable(i, n.inputs[k], w2);
          // No other input may read the bytes being overwritten.
          bool only = r >= 0;
          for (size_t j = 0; only && j < n.inputs.size(); ++j)
            only = static_cast<int>(j) == k || n.inputs[j] < 0 || p.root[n.inputs[j]] != r;
          if (only) reuse(r, w2);
        }
      }
      if (!n.def->same_index) continue;
      for (int w2 : n.outputs) {
        if (w2 < 0 || p.root[w2] != w2 || p.last[w2] < 0) continue;
        for (int u : n.inputs) {
          const int r = reusable(i, u, w2);
          if (r < 0) continue;
          // Every read of r here must be element-aligned with the output.
          bool aligned = true;
          for (int x : n.inputs)
            if (x >= 0 && p.root[x] == r) aligned = aligned && f.value_types[x] == f.value_types[w2];
          if (!aligned) continue;
          reuse(r, w2);
          break;
        }
      }
    }
  }

  // Roots produced by a kernel and read by someone get an arena slot.
  std::vector<int> slots;
  for (size_t v = 0; v < nv; ++v)
    if (p.root[v] == static_cast<int>(v) && producer[v] >= 0 && p.last[v] >= 0) {
      slots.push_back(static_cast<int>(v));
      p.size[v] = slot_bytes(f.value_types[v]);
      p.naive_bytes += p.size[v];
    }
  std::stable_sort(slots.begin(), slots.end(), [&](int a, int b) {
    if (p.size[a] != p.size[b]) return p.size[a] > p.size[b];
    return p.first[a] < p.first[b];
  });

  std::vector<int> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of conflicting placed values
  for (int v : slots) {
    busy.clear();
    for (int u : placed)
      if (p.first[u] <= p.last[v] && p.first[v] <= p.last[u])
        busy.emplace_back(p.offset[u], p.offset[u] + p.size[u]);
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + p.size[v] <= b) break;
      at = std::max(at, e);
    }
    p.offset[v] = at;
    p.arena_bytes = std::max(p.arena_bytes, at + p.size[v]);
    placed.push_back(v);
  }
  return p;
}

std::string bytes_str(size_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu bytes", n);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string memory_summary(const MemoryPlan& p, size_t state_bytes) {
  constexpr double MiB = 1024.0 * 1024.0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "arena %.2f MiB (naive %.2f MiB), state %.2f MiB, donated %zu state outputs",
                p.arena_bytes / MiB, p.naive_bytes / MiB, state_bytes / MiB, p.donated.size());
  return buf;
}

std::string memory_peak_report(const Function& f, const MemoryPlan& p, int top) {
  constexpr double MiB = 1024.0 * 1024.0;
  const int end = static_cast<int>(f.nodes.size());
  std::vector<size_t> live(end + 1, 0);
  for (size_t v = 0; v < p.size.size(); ++v)
    if (p.has_slot(v))
      for (int i = std::max(p.first[v], 0); i <= p.last[v]; ++i) live[i] += p.size[v];
  const int at = static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin());
  std::vector<int> here;
  for (size_t v = 0; v < p.size.size(); ++v)
    if (p.has_slot(v) && p.first[v] <= at && at <= p.last[v]) here.push_back(static_cast<int>(v));
  std::sort(here.begin(), here.end(), [&](int a, int b) { return p.size[a] > p.size[b]; });
  char buf[256];
  std::snprintf(buf, sizeof buf, "memory peak %.2f MiB live at node %d (%s %s), %zu values:\n",
                live[at] / MiB, at, at < end ? f.nodes[at].name.c_str() : "outputs",
                at < end ? f.nodes[at].op.c_str() : "", here.size());
  std::string out = buf;
  for (int k = 0; k < std::min<int>(top, here.size()); ++k) {
    const int v = here[k];
    std::snprintf(buf, sizeof buf, "  %8.2f MiB  %-28s %-24s live [%d, %d]\n", p.size[v] / MiB,
                  f.value_names[v].c_str(), f.value_types[v].str().c_str(), p.first[v], p.last[v]);
    out += buf;
  }
  return out;
}

}  // namespace ts

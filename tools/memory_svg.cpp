#include "memory_svg.h"

#include <algorithm>
#include <cstdio>

#include "svg.h"

namespace tscli {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Neighbouring buffers get clearly different hues.
std::string colour(int i) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%d, 65%%, 62%%)", (i * 137) % 360);
  return buf;
}

}  // namespace

MemoryPicture memory_svg(const ts::Function& f, const ts::MemoryPlan& p) {
  const int end = static_cast<int>(f.nodes.size());
  const size_t nv = p.root.size();
  // Who shares each root's bytes, for the tooltip.
  std::vector<std::vector<int>> sharers(nv);
  for (size_t v = 0; v < nv; ++v)
    if (p.live[v] && p.root[v] != static_cast<int>(v)) sharers[p.root[v]].push_back(static_cast<int>(v));

  const double w = 1200, h = 800;
  Svg svg(w, h);
  char head[200];
  std::snprintf(head, sizeof head, "%s memory plan: arena %.2f MiB (naive %.2f MiB)", f.name.c_str(),
                p.arena_bytes / kMiB, p.naive_bytes / kMiB);
  svg.text(w / 2, 28, head, R"(text-anchor="middle" font-size="16" class="title")");
  Frame fr{90, 50, w - 130, h - 130, 0, static_cast<double>(end + 1), 0,
           std::max(p.arena_bytes, size_t(1)) / kMiB};
  fr.round_ranges(10, 8);
  fr.draw_axes(svg, "node index (schedule order)", "arena offset (MiB)", 10, 8);
  svg.rect(fr.left, fr.py(p.arena_bytes / kMiB), fr.width, fr.py(0) - fr.py(p.arena_bytes / kMiB),
           R"(fill="none" stroke="#999" stroke-dasharray="4 3" class="arena")",
           "arena: " + ts::bytes_str(p.arena_bytes));

  MemoryPicture out;
  svg.open_group(R"(class="buffers")");
  for (size_t v = 0; v < nv; ++v) {
    if (p.root[v] != static_cast<int>(v) || !p.has_slot(v)) continue;
    const int first = std::max(p.first[v], 0), last = std::max(p.last[v], first);
    const double y0 = fr.py(p.offset[v] / kMiB), y1 = fr.py((p.offset[v] + p.size[v]) / kMiB);
    std::string title = "%" + f.value_names[v] + ": " + ts::bytes_str(p.size[v]) + " (" +
                        std::to_string(p.size[v]) + " bytes) at offset " +
                        std::to_string(p.offset[v]) + ", nodes " + std::to_string(first) + "-" +
                        (last >= end ? "end" : std::to_string(last));
    for (size_t i = 0; i < sharers[v].size() && i < 4; ++i)
      title += (i ? ", %" : "; shared with %") + f.value_names[sharers[v][i]];
    if (sharers[v].size() > 4) title += " and " + std::to_string(sharers[v].size() - 4) + " more";
    svg.rect(fr.px(first), y1, std::max(fr.px(last + 1) - fr.px(first), 1.0),
             std::max(y0 - y1, 0.5),
             "fill=\"" + colour(out.buffers) + "\" stroke=\"#333\" stroke-width=\"0.3\" "
             "class=\"buffer\" data-value=\"" + xml_escape(f.value_names[v]) +
                 "\" data-offset=\"" + std::to_string(p.offset[v]) + "\" data-bytes=\"" +
                 std::to_string(p.size[v]) + "\" data-first=\"" + std::to_string(first) +
                 "\" data-last=\"" + std::to_string(last) + "\"",
             title);
    ++out.buffers;
  }
  svg.close_group();
  out.svg = svg.str();
  return out;
}

}  // namespace tscli

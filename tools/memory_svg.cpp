#include "memory_svg.h"

#include <algorithm>
#include <cstdio>

#include "svg.h"
#include "trainstep/check.h"

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

MemoryPicture memory_svg(const ts::MemoryLayout& p) {
  const int end = p.nodes;
  const double w = 1200, h = 800;
  Svg svg(w, h);
  char head[200];
  std::snprintf(head, sizeof head, "%s memory plan: arena %.2f MiB (naive %.2f MiB)", p.function.c_str(),
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
  for (const ts::PlannedBuffer& b : p.buffers) {
    const int first = std::max(b.first, 0), last = std::max(b.last, first);
    const double y0 = fr.py(b.offset / kMiB), y1 = fr.py((b.offset + b.bytes) / kMiB);
    std::string title = "%" + b.name + ": " + ts::bytes_str(b.bytes) + " (" +
                        std::to_string(b.bytes) + " bytes) at offset " +
                        std::to_string(b.offset) + ", nodes " + std::to_string(first) + "-" +
                        (last >= end ? "end" : std::to_string(last));
    for (size_t i = 0; i < b.shared_with.size() && i < 4; ++i)
      title += (i ? ", %" : "; shared with %") + b.shared_with[i];
    if (b.shared_with.size() > 4) title += " and " + std::to_string(b.shared_with.size() - 4) + " more";
    svg.rect(fr.px(first), y1, std::max(fr.px(last + 1) - fr.px(first), 1.0),
             std::max(y0 - y1, 0.5),
             "fill=\"" + colour(out.buffers) + "\" stroke=\"#333\" stroke-width=\"0.3\" "
             "class=\"buffer\" data-value=\"" + xml_escape(b.name) +
                 "\" data-offset=\"" + std::to_string(b.offset) + "\" data-bytes=\"" +
                 std::to_string(b.bytes) + "\" data-first=\"" + std::to_string(first) +
                 "\" data-last=\"" + std::to_string(last) + "\"",
             title);
    ++out.buffers;
  }
  svg.close_group();
  out.svg = svg.str();
  return out;
}

}  // namespace tscli

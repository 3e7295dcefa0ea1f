// `inspect --memory`: a memory plan (ts::MemoryLayout) as an SVG
// timeline. x is the node index in schedule order, y the arena offset in
// MiB; each planned buffer (a root value with an arena slot) is one
// <rect class="buffer"> from its producing node to its last reader, with a
// <title> tooltip naming the value (and the values sharing its bytes: views,
// in-place results) and its size, and data-value/-offset/-bytes/-first/-last
// attributes for tools.
#pragma once
#include <string>

#include "trainstep/inspect.h"

namespace tscli {

struct MemoryPicture {
  std::string svg;
  int buffers = 0;  // rects drawn
};

MemoryPicture memory_svg(const ts::MemoryLayout& p);

}  // namespace tscli

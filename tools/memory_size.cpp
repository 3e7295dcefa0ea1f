#include "memory_size.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "trainstep/error.h"

namespace tscli {

size_t parse_memory_size(const std::string& text) {
  size_t pos = 0;
  double v = -1;
  try {
    v = std::stod(text, &pos);
  } catch (const std::logic_error&) {
  }
  std::string unit = text.substr(std::min(pos, text.size()));
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (!(v > 0) || scale == 0 || !std::isfinite(v * scale) || v * scale >= 0x1p63)
    ts::fail("bad memory size '" + text + "' (expected e.g. 512M, 2G, 1.5GiB or a byte count)");
  return static_cast<size_t>(v * scale);
}

}  // namespace tscli

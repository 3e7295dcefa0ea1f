// The op list `trainstep ops` prints and the exporter reads.
#include <algorithm>

#include "ir/program.h"
#include "ops/op.h"
#include "runtime/device.h"
#include "trainstep/inspect.h"

namespace ts {

std::vector<OpInfo> supported_ops(Device d) {
  const std::vector<std::string> on_device = device_kernel_ops(d);
  std::vector<OpInfo> ops;
  for (const auto& op : OpRegistry::get().all())
    if (d == Device::Cpu || std::find(on_device.begin(), on_device.end(), op.name) != on_device.end())
      ops.push_back({op.name, op.doc, op.bf16 != Bf16::No});
  return ops;
}

int program_format_version() { return kFormatVersion; }

}  // namespace ts

// The safetensors format: an 8-byte little-endian header length N, N bytes of
// JSON header ({"__metadata__": {...}, "name": {"dtype", "shape",
// "data_offsets"}}), then the raw tensor data. Everything read from a file is
// validated before use; failures are one-line ts::Error naming the source.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/tensor.h"

namespace ts {

struct SafeTensors {
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, HostTensor>> tensors;  // in file order (sorted by offset)
  const HostTensor* find(const std::string& name) const;    // nullptr if absent
};

using NamedTensors = std::vector<std::pair<std::string, const Tensor*>>;

SafeTensors read_safetensors(const std::string& path);
// Only the header's __metadata__ (reads the header, not the tensor data).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);
// `what` names the source (a path, "checkpoint in memory", ...) in errors.
SafeTensors parse_safetensors(const std::string& bytes, const std::string& what);

// Tensors are written in the given order, contiguously; the write is atomic.
void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const NamedTensors& tensors);
std::string serialize_safetensors(const std::map<std::string, std::string>& metadata,
                                  const NamedTensors& tensors);

}  // namespace ts

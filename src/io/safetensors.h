// The safetensors format: an 8-byte little-endian header length N, N bytes of
// JSON header ({"__metadata__": {...}, "name": {"dtype", "shape",
// "data_offsets"}}), then the raw tensor data. Everything read from a file is
// validated before use; failures are one-line ts::Error naming the source.
//
// Integrity (io/checksum.h): every file written here carries an XXH3-64 of
// each tensor's bytes and of its header; a reader checks them before it
// returns anything, and the error names the file, the tensor, and the
// expected and found checksums. Files without checksums (written before
// they existed) still load, with `checksummed` false.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/tensor.h"

namespace ts {

struct SafeTensors {
  std::map<std::string, std::string> metadata;  // the file's, checksum keys included
  std::vector<std::pair<std::string, HostTensor>> tensors;
  bool checksummed = false;  // the file had checksums (and they matched)  // in file order (sorted by offset)
  const HostTensor* find(const std::string& name) const;    // nullptr if absent
};

using NamedTensors = std::vector<std::pair<std::string, const Tensor*>>;

// A file's header without its data: the metadata and where each tensor lies.
struct SafeTensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;   // within the data block
  std::string checksum;  // expected XXH3-64 (hex) of its bytes, "" when the file has none
};
struct SafeTensorsLayout {
  std::map<std::string, std::string> metadata;  // checksum keys included
  std::vector<SafeTensorsEntry> entries;        // by offset
  bool checksummed = false;                     // the header checksum matched
  uint64_t data_offset = 0;                     // the data block's first byte in the file
};
// Parses and checks the header of a whole file held in memory (e.g. a
// mapped file) without touching its data: the caller checks a tensor's
// bytes against its checksum when it reads them (checksum_hex).
SafeTensorsLayout parse_safetensors_layout(const char* data, uint64_t size, const std::string& what);

SafeTensors read_safetensors(const std::string& path);
// Only the header's __metadata__ (reads the header, not the tensor data;
// checks the header checksum, not the data's).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);
// `what` names the source (a path, "checkpoint in memory", ...) in errors.
SafeTensors parse_safetensors(const std::string& bytes, const std::string& what);

// Tensors are written in the given order, contiguously; the write is atomic.
// Checksum keys in `metadata` are replaced by freshly computed ones.
void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const NamedTensors& tensors);
std::string serialize_safetensors(const std::map<std::string, std::string>& metadata,
                                  const NamedTensors& tensors);

}  // namespace ts

// Integrity checksums of safetensors files (docs/format.md, "Checksums").
//
// Writers add three metadata keys: the algorithm, an XXH3-64 of every
// tensor's bytes, and an XXH3-64 of the rest of the header (every other
// metadata key and value, every tensor's name, dtype, shape and offsets),
// so a flipped bit anywhere in a file is caught when it is read. Files
// written before checksums existed have none of the keys: they still load,
// and has_checksums() lets the caller say so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainstep/check.h"  // unchecked_notice, declared once for the library and its users

namespace ts {

constexpr const char* kChecksumAlgorithmKey = "checksum_algorithm";
constexpr const char* kTensorChecksumsKey = "tensor_checksums";
constexpr const char* kHeaderChecksumKey = "header_checksum";
constexpr const char* kChecksumAlgorithm = "xxh3_64";

// XXH3-64 (seed 0) of a byte range, as 16 lower-case hex digits (the
// canonical big-endian spelling, as Python's xxhash.xxh3_64_hexdigest).
std::string checksum_hex(const void* data, size_t size);

// XXH3-64 over bytes given in pieces (the same value as checksum_hex of
// their concatenation), so data is hashed while it is still in cache.
class Checksummer {
 public:
  Checksummer();
  ~Checksummer();
  Checksummer(const Checksummer&) = delete;
  Checksummer& operator=(const Checksummer&) = delete;
  void update(const void* data, size_t size);
  std::string hex() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

// One tensor's header entry, as it takes part in the header checksum.
struct ChecksumEntry {
  std::string name, dtype;  // dtype as spelled in the file ("F32")
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// The header checksum: metadata without kHeaderChecksumKey (in key order),
// then the entries in name order, each field length-prefixed.
std::string header_checksum(const std::map<std::string, std::string>& metadata,
                            std::vector<ChecksumEntry> entries);

// True if any checksum key is present (a reader then requires all three).
bool has_checksums(const std::map<std::string, std::string>& metadata);
// Removes the three checksum keys (a writer recomputes them).
void strip_checksums(std::map<std::string, std::string>& metadata);

}  // namespace ts

#include "io/checksum.h"

// Inlined, so XXH3 is compiled with this build's vector ISA (the shared
// library is built for baseline x86-64: half the speed here).
#define XXH_INLINE_ALL
// GCC 12 sees false "maybe uninitialized" paths in xxhash's AVX-512 code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xxhash.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdio>
#include <new>

namespace ts {

namespace {

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_str(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

}  // namespace

std::string checksum_hex(const void* data, size_t size) { return hex(XXH3_64bits(data, size)); }

Checksummer::Checksummer() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Checksummer::~Checksummer() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Checksummer::update(const void* data, size_t size) {
  if (size) XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

std::string Checksummer::hex() const {
  return ts::hex(XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)));
}

std::string header_checksum(const std::map<std::string, std::string>& metadata,
                            std::vector<ChecksumEntry> entries) {
  std::string buf = "trainstep-header-checksum-v1";
  for (const auto& [k, v] : metadata) {
    if (k == kHeaderChecksumKey) continue;
    buf.push_back('M');
    put_str(buf, k);
    put_str(buf, v);
  }
  std::sort(entries.begin(), entries.end(),
            [](const ChecksumEntry& a, const ChecksumEntry& b) { return a.name < b.name; });
  for (const auto& e : entries) {
    buf.push_back('T');
    put_str(buf, e.name);
    put_str(buf, e.dtype);
    put_u64(buf, e.shape.size());
    for (int64_t d : e.shape) put_u64(buf, static_cast<uint64_t>(d));
    put_u64(buf, e.begin);
    put_u64(buf, e.end);
  }
  return checksum_hex(buf.data(), buf.size());
}

bool has_checksums(const std::map<std::string, std::string>& metadata) {
  return metadata.count(kChecksumAlgorithmKey) || metadata.count(kTensorChecksumsKey) ||
         metadata.count(kHeaderChecksumKey);
}

std::string unchecked_notice(const std::string& path) {
  return "notice: " + path +
         " has no checksums (written before trainstep checked file integrity), so damage to "
         "its data cannot be detected; re-export or re-save it to add them";
}

void strip_checksums(std::map<std::string, std::string>& metadata) {
  metadata.erase(kChecksumAlgorithmKey);
  metadata.erase(kTensorChecksumsKey);
  metadata.erase(kHeaderChecksumKey);
}

}  // namespace ts

#include "io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "trainstep/error.h"
#include "io/atomic_file.h"
#include "io/checksum.h"

namespace ts {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeader = 100ull << 20;  // same limit as the reference implementation
constexpr size_t kMaxRank = 16;

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void put_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A JSON integer >= 0 that fits in int64 (so shapes and offsets are safe to use).
bool as_count(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
  } else if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = static_cast<uint64_t>(v);
  } else {
    return false;
  }
  return out <= static_cast<uint64_t>(INT64_MAX);
}

// nlohmann keeps the last of duplicate keys silently; this callback sees every
// key as it is parsed so duplicates can be reported instead.
struct DupKeyCheck {
  std::vector<std::set<std::string>> stack;
  std::string dup;
  bool operator()(int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      stack.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!stack.empty()) stack.pop_back();
    } else if (ev == json::parse_event_t::key && !stack.empty() && dup.empty()) {
      if (!stack.back().insert(parsed.get<std::string>()).second) dup = parsed.get<std::string>();
    }
    return true;
  }
};

using Entry = SafeTensorsEntry;

Entry parse_entry(const std::string& what, const std::string& name, const json& j,
                  uint64_t data_size) {
  std::string where = what + ": tensor '" + name + "': ";
  if (!j.is_object()) fail(where + "entry is not a JSON object");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!j.contains(k)) fail(where + "missing \"" + k + "\"");

  Entry e;
  e.name = name;
  const json& jd = j["dtype"];
  if (!jd.is_string()) fail(where + "dtype is not a string");
  std::string ds = jd.get<std::string>();
  try {
    e.dtype = dtype_from_name(ds);
  } catch (const Error&) {
    fail(where + "unknown dtype '" + ds + "'");
  }
  // dtype_from_name also takes "float32"; the file format only uses "F32".
  if (ds != dtype_safetensors_name(e.dtype)) fail(where + "unknown dtype '" + ds + "'");

  const json& js = j["shape"];
  if (!js.is_array()) fail(where + "shape is not a list");
  if (js.size() > kMaxRank)
    fail(where + "rank " + std::to_string(js.size()) + " exceeds the limit of " +
         std::to_string(kMaxRank));
  // Multiply left to right exactly like shape_numel, so an accepted shape can
  // never overflow later in the runtime.
  uint64_t numel = 1;
  for (const json& d : js) {
    uint64_t v;
    if (!as_count(d, v)) fail(where + "shape is not a list of non-negative integers");
    if (__builtin_mul_overflow(numel, v, &numel) || numel > static_cast<uint64_t>(INT64_MAX))
      fail(where + "shape " + js.dump() + " overflows the element count");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes) ||
      nbytes > static_cast<uint64_t>(INT64_MAX))
    fail(where + "shape " + js.dump() + " overflows the byte size");

  const json& jo = j["data_offsets"];
  if (!jo.is_array() || jo.size() != 2 || !as_count(jo[0], e.begin) || !as_count(jo[1], e.end))
    fail(where + "data_offsets is not a list of two non-negative integers");
  if (e.begin > e.end || e.end > data_size)
    fail(where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
         "] out of the data block (" + std::to_string(data_size) + " bytes)");
  if (e.end - e.begin != nbytes)
    fail(where + "size mismatch: " + ds + shape_str(e.shape) + " needs " + std::to_string(nbytes) +
         " bytes, data_offsets span " + std::to_string(e.end - e.begin));
  return e;
}

// Builds the padded header (length prefix included) and checks the inputs.
// The checksum keys of `metadata`, if any, are replaced by the tensors' own.
std::string build_header(const std::string& what, std::map<std::string, std::string> metadata,
                         const NamedTensors& tensors) {
  json h = json::object();
  json sums = json::object();
  std::vector<ChecksumEntry> entries;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(what + ": '__metadata__' cannot be a tensor name");
    if (h.contains(name)) fail(what + ": duplicate tensor name '" + name + "'");
    if (!t) fail(what + ": tensor '" + name + "' is null");
    size_t n = t->nbytes();
    if (n > 0 && !t->data) fail(what + ": tensor '" + name + "' has no data");
    h[name] = {{"dtype", dtype_safetensors_name(t->dtype)},
               {"shape", t->shape},
               {"data_offsets", {offset, offset + n}}};
    sums[name] = checksum_hex(t->data, n);
    entries.push_back({name, dtype_safetensors_name(t->dtype), t->shape, offset, offset + n});
    offset += n;
  }
  strip_checksums(metadata);
  metadata[kChecksumAlgorithmKey] = kChecksumAlgorithm;
  metadata[kTensorChecksumsKey] = sums.dump();
  metadata[kHeaderChecksumKey] = header_checksum(metadata, std::move(entries));
  h["__metadata__"] = metadata;
  std::string text;
  try {
    text = h.dump();
  } catch (const json::exception& ex) {
    fail(what + ": cannot encode header: " + ex.what());
  }
  // Pad with spaces so the data block starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + text.size());
  put_le64(out, text.size());
  return out + text;
}

// The length prefix of a file of `size` bytes whose first 8 are p.
uint64_t header_length(const char* p, uint64_t size, const std::string& what) {
  if (size < 8)
    fail(what + ": too short for safetensors (" + std::to_string(size) + " bytes, need at least 8)");
  uint64_t n = read_le64(p);
  if (n > kMaxHeader)
    fail(what + ": header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8)
    fail(what + ": truncated: header says " + std::to_string(n) + " bytes, file has " +
         std::to_string(size - 8) + " after the length prefix");
  return n;
}

json parse_header(const char* p, uint64_t n, const std::string& what) {
  // nlohmann stops at a NUL as at the end of input, so bytes after one
  // would go unread (and unchecked); JSON has no place for a raw NUL.
  if (std::memchr(p, 0, n)) fail(what + ": header is not valid JSON: it contains a NUL byte");
  DupKeyCheck dup;
  json h;
  try {
    h = json::parse(p, p + n, std::ref(dup));
  } catch (const json::exception& ex) {
    fail(what + ": header is not valid JSON: " + ex.what());
  }
  if (!h.is_object()) fail(what + ": header is not a JSON object");
  if (!dup.dup.empty()) fail(what + ": duplicate key '" + dup.dup + "' in header");
  return h;
}

std::map<std::string, std::string> metadata_of(const json& h, const std::string& what) {
  std::map<std::string, std::string> m;
  if (!h.contains("__metadata__")) return m;
  const json& val = h["__metadata__"];
  if (!val.is_object()) fail(what + ": __metadata__ is not a JSON object");
  for (const auto& [mk, mv] : val.items()) {
    if (!mv.is_string()) fail(what + ": metadata value for '" + mk + "' is not a string");
    m[mk] = mv.get<std::string>();
  }
  return m;
}

// The header of a file: metadata and tensor entries, checked to tile the
// data block and, when the file has checksums, against its header checksum.
using Layout = SafeTensorsLayout;

void check_checksums(Layout& l, const std::string& what) {
  if (!has_checksums(l.metadata)) return;
  for (const char* k : {kChecksumAlgorithmKey, kTensorChecksumsKey, kHeaderChecksumKey})
    if (!l.metadata.count(k))
      fail(what + ": the header is damaged: it has checksums but no '" + k + "' entry");
  if (l.metadata[kChecksumAlgorithmKey] != kChecksumAlgorithm)
    fail(what + ": unknown checksum algorithm '" + l.metadata[kChecksumAlgorithmKey] +
         "' (this build checks " + kChecksumAlgorithm + ")");
  std::vector<ChecksumEntry> ce;
  for (const Entry& e : l.entries)
    ce.push_back({e.name, dtype_safetensors_name(e.dtype), e.shape, e.begin, e.end});
  const std::string found = header_checksum(l.metadata, std::move(ce));
  const std::string& expected = l.metadata[kHeaderChecksumKey];
  if (found != expected)
    fail(what + ": the header is corrupt: header checksum " + found + ", expected " + expected +
         " (restore the file from a good copy or re-create it)");
  // The header checksum covers this value, so a failure here is a writer's bug.
  json sums = json::parse(l.metadata[kTensorChecksumsKey], nullptr, false);
  if (!sums.is_object() || sums.size() != l.entries.size())
    fail(what + ": the tensor checksums do not list every tensor");
  for (Entry& e : l.entries) {
    auto it = sums.find(e.name);
    if (it == sums.end() || !it->is_string())
      fail(what + ": tensor '" + e.name + "' has no checksum");
    e.checksum = it->get<std::string>();
  }
  l.checksummed = true;
}

Layout parse_layout(const char* header, uint64_t n, uint64_t data_size, const std::string& what) {
  json h = parse_header(header, n, what);
  Layout l;
  l.metadata = metadata_of(h, what);
  for (const auto& [key, val] : h.items()) {
    if (key == "__metadata__") continue;
    l.entries.push_back(parse_entry(what, key, val, data_size));
  }

  // Tensors must tile the data block exactly: no overlaps, gaps or slack.
  std::stable_sort(l.entries.begin(), l.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : l.entries) {
    if (e.begin < pos)
      fail(what + ": tensors '" + prev->name + "' and '" + e.name + "' overlap in the data block");
    if (e.begin > pos)
      fail(what + ": bytes [" + std::to_string(pos) + ", " + std::to_string(e.begin) +
           ") of the data block are not covered by any tensor");
    pos = e.end;
    if (e.end > e.begin) prev = &e;
  }
  if (pos != data_size)
    fail(what + ": data block has " + std::to_string(data_size) + " bytes but tensors cover " +
         std::to_string(pos));
  check_checksums(l, what);
  return l;
}

// Fills every tensor from the data block, in offset order: copy(dst, n)
// delivers the block's next n bytes, each piece hashed as it arrives, and
// every checksum is compared before anything is returned. (Hashing on a
// second thread while reading was measured: 5.0 % instead of 6.2 % on a
// 100 MiB load, not worth the thread.) Every size is bounded by the input
// (parse_layout), so the allocations are safe.
template <class Copy>
SafeTensors load_tensors(Layout&& l, Copy copy, const std::string& what) {
  constexpr size_t kPiece = 1 << 20;
  SafeTensors st;
  st.metadata = std::move(l.metadata);
  st.checksummed = l.checksummed;
  st.tensors.reserve(l.entries.size());
  for (const Entry& e : l.entries) {
    HostTensor t(e.dtype, e.shape);
    Checksummer sum;
    char* dst = static_cast<char*>(t.view.data);
    for (uint64_t done = 0, n = e.end - e.begin; done < n;) {
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(kPiece, n - done));
      copy(dst + done, piece);
      if (l.checksummed) sum.update(dst + done, piece);
      done += piece;
    }
    if (l.checksummed && sum.hex() != e.checksum)
      fail(what + ": tensor '" + e.name + "' is corrupt: checksum " + sum.hex() + ", expected " +
           e.checksum + " (restore the file from a good copy or re-create it)");
    st.tensors.emplace_back(e.name, std::move(t));
  }
  return st;
}

}  // namespace

const HostTensor* SafeTensors::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

SafeTensors parse_safetensors(const std::string& bytes, const std::string& what) {
  uint64_t n = header_length(bytes.data(), bytes.size(), what);
  Layout l = parse_layout(bytes.data() + 8, n, bytes.size() - 8 - n, what);
  const char* src = bytes.data() + 8 + n;
  return load_tensors(
      std::move(l),
      [&](char* dst, size_t k) {
        std::memcpy(dst, src, k);
        src += k;
      },
      what);
}

SafeTensorsLayout parse_safetensors_layout(const char* data, uint64_t size, const std::string& what) {
  const uint64_t n = header_length(data, size, what);
  Layout l = parse_layout(data + 8, n, size - 8 - n, what);
  l.data_offset = 8 + n;
  return l;
}

namespace {

// Reads and checks the header of an open file, leaving `in` at the data block.
Layout read_layout(FileReader& in, const std::string& path) {
  char prefix[8] = {};
  if (in.size() >= 8) in.read(prefix, 8);
  const uint64_t n = header_length(prefix, in.size(), path);
  std::string text(n, '\0');
  in.read(text.data(), n);
  return parse_layout(text.data(), n, in.size() - 8 - n, path);
}

}  // namespace

SafeTensors read_safetensors(const std::string& path) {
  FileReader in(path);
  Layout l = read_layout(in, path);
  return load_tensors(std::move(l), [&](char* dst, size_t k) { in.read(dst, k); }, path);
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  FileReader in(path);
  return read_layout(in, path).metadata;
}

std::string serialize_safetensors(const std::map<std::string, std::string>& metadata,
                                  const NamedTensors& tensors) {
  std::string out = build_header("safetensors", metadata, tensors);
  for (const auto& nt : tensors)
    if (size_t n = nt.second->nbytes()) out.append(static_cast<const char*>(nt.second->data), n);
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const NamedTensors& tensors) {
  // Write header and tensor memory as separate chunks to avoid a full copy.
  std::string header = build_header(path, metadata, tensors);
  std::vector<Chunk> chunks{{header.data(), header.size()}};
  for (const auto& nt : tensors) chunks.emplace_back(nt.second->data, nt.second->nbytes());
  write_file_atomic(path, chunks);
}

}  // namespace ts

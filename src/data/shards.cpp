#include "data/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "trainstep/error.h"

namespace ts {

using json = nlohmann::json;

ShardIndex parse_shard_index(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail(what + ": not a JSON object (is this a shard folder's index?)");
  auto str = [&](const json& o, const char* k, const std::string& where) {
    auto it = o.find(k);
    if (it == o.end() || !it->is_string()) fail(what + ": " + where + " has no string '" + k + "'");
    return it->get<std::string>();
  };
  auto count = [&](const json& o, const char* k, const std::string& where) {
    auto it = o.find(k);
    if (it == o.end() || !it->is_number_unsigned() || it->get<uint64_t>() > (uint64_t{1} << 62))
      fail(what + ": " + where + " has no count '" + k + "'");
    return static_cast<int64_t>(it->get<uint64_t>());
  };
  if (str(j, "format", "the index") != "trainstep-shards")
    fail(what + ": format '" + j["format"].get<std::string>() + "', expected 'trainstep-shards'");
  if (count(j, "version", "the index") != 1)
    fail(what + ": version " + std::to_string(j["version"].get<uint64_t>()) + "; this build reads version 1");
  ShardIndex idx;
  auto c = j.find("complete");
  if (c == j.end() || !c->is_boolean()) fail(what + ": the index has no 'complete' flag");
  idx.complete = c->get<bool>();
  auto fields = j.find("fields");
  auto shards = j.find("shards");
  if (fields == j.end() || !fields->is_array()) fail(what + ": the index has no 'fields' list");
  if (shards == j.end() || !shards->is_array()) fail(what + ": the index has no 'shards' list");
  for (const json& f : *fields) {
    if (!f.is_object()) fail(what + ": a field is not an object");
    Field fd;
    fd.name = str(f, "name", "a field");
    const std::string where = "field '" + fd.name + "'";
    fd.dtype = dtype_from_name(str(f, "dtype", where));
    auto shape = f.find("shape");
    if (shape == f.end() || !shape->is_array() || shape->size() > 16) fail(what + ": " + where + " has no shape");
    int64_t numel = 1;
    for (const json& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 31))
        fail(what + ": " + where + " has a bad dimension");
      fd.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
      numel *= std::max<int64_t>(fd.shape.back(), 1);
      if (numel > (int64_t{1} << 40)) fail(what + ": " + where + " is too large a sample");
    }
    for (const Field& other : idx.fields)
      if (other.name == fd.name) fail(what + ": field '" + fd.name + "' is listed twice");
    idx.fields.push_back(std::move(fd));
  }
  if (idx.fields.empty()) fail(what + ": the index lists no fields");
  for (const json& s : *shards) {
    if (!s.is_object()) fail(what + ": a shard is not an object");
    ShardIndex::Shard sh;
    sh.file = str(s, "file", "a shard");
    if (sh.file.empty() || sh.file.find('/') != std::string::npos || sh.file == "." || sh.file == "..")
      fail(what + ": shard file '" + sh.file + "' is not a file name in the folder");
    sh.samples = count(s, "samples", "shard '" + sh.file + "'");
    sh.header_checksum = str(s, "header_checksum", "shard '" + sh.file + "'");
    idx.shards.push_back(std::move(sh));
  }
  return idx;
}

namespace {

struct Shard {
  std::string path;
  int64_t first = 0, samples = 0;  // global sample range [first, first + samples)
  void* map = nullptr;
  size_t len = 0;
  const char* data = nullptr;                // the data block
  std::vector<const SafeTensorsEntry*> by_field;  // per index field
  SafeTensorsLayout layout;
  std::once_flag checked;

  ~Shard() {
    if (map) ::munmap(map, len);
  }
  std::string where() const {
    return path + " (samples " + std::to_string(first) + ".." + std::to_string(first + samples - 1) + ")";
  }
};

class ShardDataset final : public Dataset {
 public:
  ShardDataset(std::string dir, Split split) : dir_(std::move(dir)) {
    const std::string index_path = dir_ + "/index.json";
    struct stat st;
    if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      fail(dir_ + ": no such folder (shards:DIR takes the folder trainstep.data.write wrote)");
    index_ = parse_shard_index(read_file(index_path), index_path);
    int64_t total = 0;
    for (const auto& s : index_.shards) {
      auto sh = std::make_unique<Shard>();
      sh->path = dir_ + "/" + s.file;
      sh->first = total;
      sh->samples = s.samples;
      open_shard(*sh, s);
      total += s.samples;
      shards_.push_back(std::move(sh));
    }
    const int64_t cut = total - total / 10;
    switch (split) {
      case Split::Train: first_ = 0, n_ = cut; break;
      case Split::Test: first_ = cut, n_ = total - cut; break;
      case Split::All: first_ = 0, n_ = total; break;
    }
    if (n_ == 0)
      fail(index_path + ": " + std::to_string(total) + " samples" +
           (index_.complete ? "" : " so far (the writer has not finished)") + ", none in this split");
    total_ = total;
  }

  int64_t size() const override { return n_; }

  std::string describe() const override {
    return "shard folder " + dir_ + " (" + std::to_string(total_) + " samples in " +
           std::to_string(shards_.size()) + " shards" + (index_.complete ? "" : ", so far: the writer has not finished") +
           ")";
  }

  std::vector<Field> fields() const override { return index_.fields; }

  void read(int64_t i, const ReadContext&, void* const* out) const override {
    if (i < 0 || i >= n_)
      fail(dir_ + ": sample " + std::to_string(i) + " out of range [0, " + std::to_string(n_) + ")");
    const int64_t g = first_ + i;
    auto it = std::upper_bound(shards_.begin(), shards_.end(), g,
                               [](int64_t v, const std::unique_ptr<Shard>& s) { return v < s->first; });
    Shard& sh = **(it - 1);
    std::call_once(sh.checked, [&] { verify(sh); });
    const int64_t k = g - sh.first;
    for (size_t f = 0; f < index_.fields.size(); ++f) {
      if (!out[f]) continue;
      const size_t row = index_.fields[f].nbytes();
      std::memcpy(out[f], sh.data + sh.by_field[f]->begin + row * static_cast<size_t>(k), row);
    }
  }

 private:
  void open_shard(Shard& sh, const ShardIndex::Shard& s) {
    struct Fd {
      int fd;
      ~Fd() { if (fd >= 0) ::close(fd); }
    } f{::open(sh.path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) fail(sh.path + ": " + std::strerror(errno) + " (listed in " + dir_ + "/index.json)");
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(sh.path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size < 8) fail(sh.where() + ": not a shard file (too short)");
    sh.len = static_cast<size_t>(st.st_size);
    sh.map = ::mmap(nullptr, sh.len, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (sh.map == MAP_FAILED) {
      sh.map = nullptr;
      fail(sh.path + ": cannot map: " + std::strerror(errno));
    }
    sh.layout = parse_safetensors_layout(static_cast<const char*>(sh.map), sh.len, sh.where());
    sh.data = static_cast<const char*>(sh.map) + sh.layout.data_offset;
    if (!sh.layout.checksummed) fail(sh.where() + ": the shard has no checksums; re-create it with trainstep.data.write");
    const auto hc = sh.layout.metadata.find("header_checksum");
    if (hc == sh.layout.metadata.end() || hc->second != s.header_checksum)
      fail(sh.where() + ": not the shard index.json lists (its header checksum differs): the folder "
           "mixes two writes; write it again");
    if (sh.layout.entries.size() != index_.fields.size())
      fail(sh.where() + ": " + std::to_string(sh.layout.entries.size()) + " tensors, the index lists " +
           std::to_string(index_.fields.size()) + " fields");
    for (const Field& f : index_.fields) {
      const SafeTensorsEntry* e = nullptr;
      for (const auto& en : sh.layout.entries)
        if (en.name == f.name) e = &en;
      Shape want = f.shape;
      want.insert(want.begin(), sh.samples);
      if (!e) fail(sh.where() + ": no tensor for field '" + f.name + "'");
      if (e->dtype != f.dtype || e->shape != want)
        fail(sh.where() + ": field '" + f.name + "' is " + TensorType{e->dtype, e->shape}.str() +
             ", the index says " + TensorType{f.dtype, want}.str());
      sh.by_field.push_back(e);
    }
  }

  static void verify(const Shard& sh) {
    for (const auto& e : sh.layout.entries) {
      const std::string found = checksum_hex(sh.data + e.begin, static_cast<size_t>(e.end - e.begin));
      if (found != e.checksum)
        fail(sh.where() + ": field '" + e.name + "' is corrupt: checksum " + found + ", expected " + e.checksum +
             " (write the shards again)");
    }
  }

  std::string dir_;
  ShardIndex index_;
  std::vector<std::unique_ptr<Shard>> shards_;  // by first sample
  int64_t first_ = 0, n_ = 0, total_ = 0;
};

}  // namespace

std::unique_ptr<Dataset> open_shards(const std::string& dir, Split split) {
  return std::make_unique<ShardDataset>(dir, split);
}

}  // namespace ts

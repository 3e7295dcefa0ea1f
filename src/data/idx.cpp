#include "data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trainstep/error.h"

namespace ts {

namespace {

// Refuse headers that declare absurd sizes before reading any data.
constexpr uint64_t kMaxDataBytes = 4ull << 30;

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string hex_bytes(const unsigned char* b, size_t n) {
  std::string s = "0x";
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    s += buf;
  }
  return s;
}

// zlib's gz* reader handles gzip and (transparently) plain files alike.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) {
      if (errno == ENOENT) fail(path + ": no such file");
      fail(path + ": cannot read: " + (errno ? std::strerror(errno) : "out of memory"));
    }
    gzbuffer(f_, 1 << 17);
  }
  ~GzReader() { gzclose(f_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // gzread reports a truncated stream as plain end of input; the error is
  // only visible through gzerror, so check it once all data has been read.
  void check_complete() {
    int code = 0;
    gzerror(f_, &code);
    if (code == Z_BUF_ERROR) fail(path_ + ": truncated: gzip stream ends early");
  }

  // Reads up to n bytes; returns how many arrived (short only at end of input).
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      unsigned ask = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      int r = gzread(f_, static_cast<char*>(dst) + got, ask);
      if (r < 0) {
        int code = 0;
        const char* msg = gzerror(f_, &code);
        if (code == Z_ERRNO) fail(path_ + ": cannot read: " + std::strerror(errno));
        fail(path_ + ": corrupt gzip data: " + msg);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }

 private:
  std::string path_;
  gzFile f_;
};

std::string find_file(const std::string& dir, const std::string& name) {
  std::string p = dir + "/" + name;
  if (file_exists(p)) return p;
  if (file_exists(p + ".gz")) return p + ".gz";
  fail(dir + ": missing " + name + " (or " + name + ".gz)");
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  GzReader in(path);
  unsigned char magic[4];
  size_t got = in.read(magic, 4);
  if (got < 4) fail(path + ": not an IDX file (only " + std::to_string(got) + " bytes)");
  if (magic[0] != 0 || magic[1] != 0) fail(path + ": not an IDX file (bad magic " + hex_bytes(magic, 4) + ")");
  if (magic[2] != 0x08)
    fail(path + ": unsupported IDX element type 0x" + hex_bytes(magic + 2, 1).substr(2) +
         " (only 0x08 unsigned byte)");
  int rank = magic[3];
  if (rank < 1 || rank > 4) fail(path + ": unsupported IDX rank " + std::to_string(rank) + " (need 1..4)");

  unsigned char dimbuf[16];
  size_t want = 4 * static_cast<size_t>(rank);
  if (in.read(dimbuf, want) < want) fail(path + ": truncated: header ends inside the dimensions");
  IdxArray a;
  uint64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const unsigned char* p = dimbuf + 4 * i;
    uint64_t d = (uint64_t(p[0]) << 24) | (uint64_t(p[1]) << 16) | (uint64_t(p[2]) << 8) | p[3];
    a.dims.push_back(static_cast<int64_t>(d));
    // Four u32 dims can overflow u64; stop as soon as the limit is passed.
    total *= d;
    if (total > kMaxDataBytes)
      fail(path + ": header declares more than " + std::to_string(kMaxDataBytes >> 30) +
           " GiB of data");
  }

  // Grow the buffer as data actually arrives (through a small chunk), so a
  // lying header in a tiny file cannot force a large allocation up front.
  std::vector<uint8_t> chunk(std::min<uint64_t>(total, 1u << 16));
  a.data.reserve(std::min<uint64_t>(total, 1u << 20));
  while (a.data.size() < total) {
    const size_t want = std::min<uint64_t>(chunk.size(), total - a.data.size());
    const size_t r = in.read(chunk.data(), want);
    a.data.insert(a.data.end(), chunk.data(), chunk.data() + r);
    if (r < want) break;
  }
  const uint64_t have = a.data.size();
  if (have < total) {
    in.check_complete();
    fail(path + ": truncated: header declares " + std::to_string(total) + " bytes of data, file has " +
         std::to_string(have));
  }
  unsigned char extra;
  if (in.read(&extra, 1) != 0)
    fail(path + ": trailing bytes after the " + std::to_string(total) + " bytes of data");
  in.check_complete();
  return a;
}

ImageDataset load_idx_split(const std::string& dir, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string ip = find_file(dir, prefix + "-images-idx3-ubyte");
  std::string lp = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray im = read_idx(ip);
  IdxArray lb = read_idx(lp);
  if (im.dims.size() != 3) fail(ip + ": images must have rank 3, got " + std::to_string(im.dims.size()));
  if (lb.dims.size() != 1) fail(lp + ": labels must have rank 1, got " + std::to_string(lb.dims.size()));
  if (im.dims[0] != lb.dims[0])
    fail(dir + ": " + std::to_string(im.dims[0]) + " images but " + std::to_string(lb.dims[0]) +
         " labels in the " + prefix + " split");
  // Labels are unsigned bytes, so "< 256" holds by construction of the type.
  ImageDataset ds;
  ds.n = im.dims[0];
  ds.rows = im.dims[1];
  ds.cols = im.dims[2];
  ds.images = std::move(im.data);
  ds.labels = std::move(lb.data);
  return ds;
}

}  // namespace ts

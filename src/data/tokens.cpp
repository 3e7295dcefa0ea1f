#include "data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trainstep/error.h"

namespace ts {

namespace {

constexpr const char* kForm =
    "expected tokens:FILE:BLOCK[:DTYPE], BLOCK a positive integer, DTYPE uint16 (default) or uint32";

[[noreturn]] void bad_spec(const std::string& spec, const std::string& what) {
  fail("bad token dataset '" + spec + "': " + what + "; " + kForm);
}

// A positive decimal integer (digits only), or -1.
int64_t parse_positive(const std::string& s) {
  if (s.empty() || s.size() > 12) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v > 0 ? v : -1;
}

bool is_dtype_name(const std::string& s) { return s == "uint16" || s == "uint32"; }

class TokenDataset final : public Dataset {
 public:
  TokenDataset(std::string path, int64_t block, int tsize, Split split) : path_(std::move(path)), block_(block), tsize_(tsize) {
    struct Fd {  // closed on every way out; the mapping keeps the file
      int fd;
      ~Fd() { if (fd >= 0) ::close(fd); }
    } f{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) fail(path_ + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(path_ + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(path_ + ": not a regular file");
    const int64_t bytes = static_cast<int64_t>(st.st_size);
    if (bytes == 0) fail(path_ + ": the token file is empty");
    if (bytes % tsize_ != 0)
      fail(path_ + ": " + std::to_string(bytes) + " bytes is not a whole number of " + dtype() +
           " tokens (" + std::to_string(tsize_) + " bytes each); is the dtype right?");
    void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED) fail(path_ + ": cannot map: " + std::strerror(errno));
    map_ = p;
    map_len_ = static_cast<size_t>(bytes);

    const int64_t n = bytes / tsize_;
    const int64_t cut = n - n / 10;
    switch (split) {
      case Split::Train: first_ = 0, n_ = cut; break;
      case Split::Test: first_ = cut, n_ = n - cut; break;
      case Split::All: first_ = 0, n_ = n; break;
    }
    size_ = n_ > block_ ? (n_ - 1) / block_ : 0;
    if (size_ == 0) {
      const char* name = split == Split::Train ? "train" : split == Split::Test ? "test" : "whole";
      const std::string msg = path_ + ": the " + name + " split has " + std::to_string(n_) +
                              " tokens, fewer than one window of BLOCK+1 = " +
                              std::to_string(block_ + 1) + " (BLOCK " + std::to_string(block_) + ")";
      ::munmap(map_, map_len_);
      map_ = nullptr;
      fail(msg);
    }
  }

  ~TokenDataset() override {
    if (map_) ::munmap(map_, map_len_);
  }
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  int64_t size() const override { return size_; }

  std::string describe() const override {
    // Whatever the split: ReadContext::train, not the split, picks how windows start.
    return "windows of " + std::to_string(block_) + " " + dtype() + " tokens from " + path_ + " (" +
           std::to_string(n_) + " tokens; random starts in training, in order in evaluation)";
  }

  std::vector<Field> fields() const override {
    return {Field{"x", DType::I64, {block_}}, Field{"y", DType::I64, {block_}}};
  }

  void read(int64_t i, const ReadContext& c, void* const* out) const override {
    if (i < 0 || i >= size_)
      fail(path_ + ": sample " + std::to_string(i) + " out of range [0, " + std::to_string(size_) + ")");
    const int64_t start =
        c.train ? static_cast<int64_t>(sample_random(c, i) % static_cast<uint64_t>(n_ - block_)) : i * block_;
    int64_t* x = out ? static_cast<int64_t*>(out[0]) : nullptr;
    int64_t* y = out ? static_cast<int64_t*>(out[1]) : nullptr;
    if (!x && !y) return;
    const uint8_t* p = static_cast<const uint8_t*>(map_) + static_cast<size_t>(first_ + start) * tsize_;
    if (tsize_ == 2)
      copy(p, x, y, [](const uint8_t* q) { return int64_t(q[0]) | int64_t(q[1]) << 8; }, 2);
    else
      copy(p, x, y,
           [](const uint8_t* q) {
             return int64_t(q[0]) | int64_t(q[1]) << 8 | int64_t(q[2]) << 16 | int64_t(q[3]) << 24;
           },
           4);
  }

 private:
  // Token t of the window (t in [0, BLOCK]) goes to x[t] (t < BLOCK) and y[t-1] (t > 0).
  template <class Load>
  void copy(const uint8_t* p, int64_t* x, int64_t* y, Load load, int step) const {
    if (x)
      for (int64_t t = 0; t < block_; ++t) x[t] = load(p + t * step);
    if (y)
      for (int64_t t = 0; t < block_; ++t) y[t] = load(p + (t + 1) * step);
  }

  const char* dtype() const { return tsize_ == 2 ? "uint16" : "uint32"; }

  std::string path_;
  int64_t block_;
  int tsize_;            // bytes per token
  void* map_ = nullptr;  // the whole file, read-only
  size_t map_len_ = 0;
  int64_t first_ = 0, n_ = 0;  // this split: tokens [first_, first_ + n_)
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Dataset> open_tokens(const std::string& spec, Split split) {
  const std::string prefix = "tokens:";
  if (spec.compare(0, prefix.size(), prefix) != 0) bad_spec(spec, "it does not start with 'tokens:'");
  std::string rest = spec.substr(prefix.size());

  // From the right: [:DTYPE], then :BLOCK; what is left is FILE.
  auto last = [&](std::string& s) -> std::string {
    const size_t c = s.rfind(':');
    if (c == std::string::npos) return {};
    std::string tail = s.substr(c + 1);
    s.resize(c);
    return tail;
  };
  if (rest.find(':') == std::string::npos) bad_spec(spec, "no BLOCK");
  std::string tail = last(rest);
  std::string dtype = "uint16";
  if (is_dtype_name(tail)) {
    dtype = tail;
    if (rest.find(':') == std::string::npos) bad_spec(spec, "no BLOCK");
    tail = last(rest);
  } else if (parse_positive(tail) < 0) {
    // Not a BLOCK: if the component before it is one, this was meant as DTYPE.
    const size_t c = rest.rfind(':');
    if (c != std::string::npos && parse_positive(rest.substr(c + 1)) > 0)
      bad_spec(spec, "unknown DTYPE '" + tail + "'");
  }
  const int64_t block = parse_positive(tail);
  if (block < 0) bad_spec(spec, "BLOCK '" + tail + "' is not a positive integer");
  if (rest.empty()) bad_spec(spec, "no FILE");
  return std::make_unique<TokenDataset>(rest, block, dtype == "uint16" ? 2 : 4, split);
}

}  // namespace ts

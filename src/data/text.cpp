#include "data/text.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trainstep/error.h"

namespace ts {

namespace {

// Refuse absurd files before reading them.
constexpr int64_t kMaxTextBytes = int64_t(1) << 31;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int64_t TextDataset::size() const {
  const int64_t n = static_cast<int64_t>(bytes.size());
  return n > T ? (n - 1) / T : 0;
}

std::string TextDataset::describe() const {
  return "windows of " + std::to_string(T) + " bytes of " + name + " with int64 next-byte targets";
}

std::vector<Field> TextDataset::fields() const {
  return {{"x", DType::I64, {T}}, {"y", DType::I64, {T}}};
}

void TextDataset::read(int64_t i, const ReadContext&, void* const* out) const {
  const uint8_t* w = bytes.data() + i * T;
  for (int f = 0; f < 2; ++f)
    if (int64_t* o = static_cast<int64_t*>(out[f]))
      for (int64_t t = 0; t < T; ++t) o[t] = w[t + f];
}

TextDataset make_text_split(std::string name, const std::vector<uint8_t>& all, int64_t T, bool train) {
  if (T <= 0) fail(name + ": the window length must be positive, got " + std::to_string(T));
  const size_t cut = all.size() - all.size() / 10;
  TextDataset d;
  d.name = std::move(name);
  d.T = T;
  d.bytes.assign(all.begin() + (train ? 0 : cut), train ? all.begin() + cut : all.end());
  if (d.size() == 0)
    fail(d.name + ": the " + (train ? "train" : "test") + " split has " +
         std::to_string(d.bytes.size()) + " bytes, fewer than one window of " + std::to_string(T + 1));
  return d;
}

std::vector<uint8_t> read_text_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path + ": not a regular file");
  if (st.st_size > kMaxTextBytes) fail(path + ": larger than 2 GiB");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path + ": cannot read: " + std::strerror(errno));
  std::vector<uint8_t> b(static_cast<size_t>(st.st_size));
  const size_t got = b.empty() ? 0 : std::fread(b.data(), 1, b.size(), f);
  const bool err = std::ferror(f);
  std::fclose(f);
  if (err || got != b.size()) fail(path + ": read error");
  return b;
}

std::vector<uint8_t> read_fortunes(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    fail(dir + ": " + std::strerror(errno) + " (the fortune files come with the Debian package "
         "'fortunes': apt-get install fortunes)");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    struct stat st;
    if (n[0] == '.' || ends_with(n, ".dat") || ::lstat((dir + "/" + n).c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    names.push_back(n);
  }
  ::closedir(d);
  if (names.empty()) fail(dir + ": no fortune files");
  std::sort(names.begin(), names.end());
  std::vector<uint8_t> all;
  for (const auto& n : names) {
    auto b = read_text_file(dir + "/" + n);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

}  // namespace ts

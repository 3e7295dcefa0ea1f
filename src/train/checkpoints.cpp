#include "train/checkpoints.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "trainstep/error.h"

namespace ts {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".ckpt";

// The step of a file named step-<digits>.ckpt, else -1.
int64_t step_of(const std::string& name) {
  const size_t p = std::char_traits<char>::length(kPrefix), s = std::char_traits<char>::length(kSuffix);
  if (name.size() <= p + s || name.compare(0, p, kPrefix) != 0 ||
      name.compare(name.size() - s, s, kSuffix) != 0)
    return -1;
  const std::string digits = name.substr(p, name.size() - p - s);
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

}  // namespace

std::string default_checkpoint_dir(const std::string& save) {
  std::string base = save;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, kSuffix) == 0)
    base.resize(base.size() - 5);
  return base + ".checkpoints";
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "%s%010lld%s", kPrefix, (long long)step, kSuffix);
  return dir + "/" + name;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> r;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (step_of(it->path().filename().string()) >= 0) r.push_back(it->path().string());
  return r;
}

void make_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir + ": cannot create the checkpoint folder: " + ec.message());
}

void prune_checkpoints(const std::string& dir, int keep) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  const std::string own_tmp = ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (int64_t s = step_of(name); s >= 0) {
      steps.emplace_back(s, it->path());
      continue;
    }
    // A temp file of a writer that was killed (a live writer is this process).
    const size_t t = name.find(std::string(kSuffix) + ".tmp.");
    if (t != std::string::npos && step_of(name.substr(0, t + 5)) >= 0 &&
        name.compare(t + 5, std::string::npos, own_tmp) != 0)
      fs::remove(it->path(), ec);
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = std::max(keep, 1); i < steps.size(); ++i) fs::remove(steps[i].second, ec);
}

}  // namespace ts

#include "ops/kernel_choice.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/checksum.h"
#include "trainstep/cpu.h"
#include "trainstep/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ts {

namespace {

constexpr const char* kFormat = "trainstep-kernel-choices 1";
constexpr const char* kEnv = "TRAINSTEP_KERNELS";
// Every candidate name an op offers, so a misspelt TRAINSTEP_KERNELS fails.
const std::vector<std::string> kKnownNames = {"onednn", "small_k", "openblas", "one_channel", "depthwise",
                                               "winograd"};
// A challenger must beat the default by this much: timing noise alone does
// not move a pick.
constexpr double kMargin = 0.97;
// A candidate this many times slower than the default on its first timed
// call is not timed again.
constexpr double kOut = 2.0;
constexpr size_t kMaxEntries = 4096;

struct Entry {
  std::vector<std::string> names;
  std::vector<double> us;
  int pick = 0;
};

std::mutex& lock() {
  static std::mutex m;
  return m;
}
std::map<std::string, Entry>& memo() {
  static std::map<std::string, Entry> m;
  return m;
}

std::string cpu_brand() {
#if defined(__x86_64__)
  unsigned int r[12] = {};
  if (__get_cpuid(0x80000000u, &r[0], &r[1], &r[2], &r[3]) && r[0] >= 0x80000004u) {
    for (unsigned int i = 0; i < 3; ++i)
      __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    std::string s(reinterpret_cast<const char*>(r), sizeof(r));
    s = s.substr(0, s.find('\0'));
    const auto b = s.find_first_not_of(' ');
    return b == std::string::npos ? "unknown CPU" : s.substr(b);
  }
#endif
  return "unknown CPU";
}

// What the pick depends on besides the computation itself.
std::string machine_key(int threads) {
  static const std::string cpu = cpu_brand();
  const dnnl_version_t* v = dnnl_version();
  return std::string(cpu_isa_name(cpu_isa())) + " threads=" + std::to_string(threads) + " | " +
         cpu + " | onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

std::string forced_name() {
  const char* v = std::getenv(kEnv);
  std::string s = v ? v : "";
  if (s.empty() || s == "measure") return "";
  if (s == "default" ||
      std::find(kKnownNames.begin(), kKnownNames.end(), s) != kKnownNames.end())
    return s;
  std::string known = "measure, default";
  for (const auto& n : kKnownNames) known += ", " + n;
  fail(std::string(kEnv) + "=" + s + ": unknown kernel; use one of " + known);
}

// The file's entries, or none when it is missing, damaged or not ours.
json read_cache(const std::string& path) {
  if (path.empty()) return json::object();
  try {
    json f = json::parse(read_file(path));
    if (f.value("format", "") != kFormat || !f.contains("entries") || !f["entries"].is_object())
      return json::object();
    const std::string body = f["entries"].dump();
    if (f.value("checksum", "") != checksum_hex(body.data(), body.size())) return json::object();
    return f["entries"];
  } catch (const std::exception&) {
    return json::object();
  }
}

bool parse_entry(const json& j, const std::vector<std::string>& names, Entry& e) {
  try {
    e.names = j.at("names").get<std::vector<std::string>>();
    e.us = j.at("us").get<std::vector<double>>();
    e.pick = j.at("pick").get<int>();
  } catch (const std::exception&) {
    return false;
  }
  return e.names == names && e.us.size() == names.size() && e.pick >= 0 &&
         e.pick < static_cast<int>(names.size());
}

void write_cache(const std::string& path, json entries, const std::string& key, const Entry& e) {
  // A bound on the file: past it (many models, or many machines sharing a
  // home directory) it starts over, which only costs measuring again.
  if (entries.size() >= kMaxEntries) entries = json::object();
  entries[key] = {{"names", e.names}, {"us", e.us}, {"pick", e.pick}};
  const std::string body = entries.dump();
  json f = {{"format", kFormat}, {"entries", entries}, {"checksum", checksum_hex(body.data(), body.size())}};
  try {
    const std::string text = f.dump(1);
    write_file_atomic(path, text.data(), text.size());
  } catch (const Error&) {
    // A read-only or full cache directory: the pick still holds in this process.
  }
}

// Holds an exclusive lock on PATH.lock while alive, so processes that start
// together (ctest -j, MPI ranks) measure a key once and all use that pick.
// Without a lock file (no directory, read-only) it holds nothing.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

double seconds_per_call(const std::function<void()>& f, int reps) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// Best of several interleaved rounds, each long enough to read a clock by
// (the first call after a warm-up is one).
Entry measure(const std::vector<KernelCandidate>& c) {
  Entry e;
  std::vector<double> best(c.size(), INFINITY);
  std::vector<int> reps(c.size());
  std::vector<bool> out(c.size(), false);
  double longest = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    e.names.push_back(c[i].name);
    c[i].run();  // warm caches and lazily built state
    const double t = seconds_per_call(c[i].run, 1);
    best[i] = t;
    reps[i] = static_cast<int>(std::clamp(std::ceil(2e-4 / std::max(t, 1e-9)), 1.0, 100.0));
    // Twice the default's time on the first call: no round would make it
    // win, and such slow candidates are most of what measuring costs.
    out[i] = i > 0 && t > kOut * best[0];
    if (!out[i]) longest = std::max(longest, t);
  }
  // The first call counts as a round: a kernel of milliseconds times
  // steadily, and the zoo's first compile stays well under 2 s.
  const int rounds = longest > 0.005 ? 1 : 5;
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < c.size(); ++i)
      if (!out[i]) best[i] = std::min(best[i], seconds_per_call(c[i].run, reps[i]));
  for (size_t i = 0; i < c.size(); ++i) {
    e.us.push_back(1e6 * best[i]);
    if (best[i] < kMargin * best[0] && best[i] < best[e.pick]) e.pick = static_cast<int>(i);
  }
  return e;
}

}  // namespace

std::string KernelChoice::describe() const {
  std::string s = names.at(pick);
  if (from == From::Forced) return s + " (forced by " + kEnv + ")";
  if (from == From::Only) return s + " (the only candidate)";
  s += " (";
  for (size_t i = 0; i < names.size(); ++i) {
    char t[64];
    std::snprintf(t, sizeof t, "%s%s %.1f us", i ? ", " : "", names[i].c_str(), us.at(i));
    s += t;
  }
  return s + (from == From::Cache ? "; cached)" : ")");
}

KernelChoice only_choice(const std::string& key, const std::string& name) {
  KernelChoice c;
  c.key = key;
  c.names = {name};
  c.from = KernelChoice::From::Only;
  return c;
}

std::string kernel_choice_cache_path() {
  namespace fs = std::filesystem;
  const char* dir = std::getenv("TRAINSTEP_CACHE");
  if (dir) return *dir ? (fs::path(dir) / "kernel-choices.json").string() : "";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "trainstep" / "kernel-choices.json").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "trainstep" / "kernel-choices.json").string();
  return "";
}

void forget_kernel_choices() {
  std::lock_guard<std::mutex> g(lock());
  memo().clear();
}

KernelChoice choose_kernel(const std::string& key, int threads,
                           const std::vector<KernelCandidate>& candidates) {
  if (candidates.empty()) fail("choose_kernel: no candidates for " + key);
  KernelChoice out;
  out.key = key;
  for (const auto& c : candidates) out.names.push_back(c.name);
  const std::string forced = forced_name();
  if (!forced.empty()) {
    out.from = KernelChoice::From::Forced;
    auto it = std::find(out.names.begin(), out.names.end(), forced);
    out.pick = it == out.names.end() ? 0 : static_cast<int>(it - out.names.begin());
    return out;
  }
  const std::string full = key + " | " + machine_key(threads);
  std::lock_guard<std::mutex> g(lock());
  Entry e;
  if (auto it = memo().find(full); it != memo().end() && it->second.names == out.names) {
    e = it->second;
    out.from = KernelChoice::From::Cache;
  } else {
    const std::string path = kernel_choice_cache_path();
    FileLock file_lock(path);
    json entries = read_cache(path);
    if (entries.contains(full) && parse_entry(entries[full], out.names, e)) {
      out.from = KernelChoice::From::Cache;
    } else {
      e = measure(candidates);
      if (!path.empty()) write_cache(path, std::move(entries), full, e);
    }
    memo()[full] = e;
  }
  out.us = e.us;
  out.pick = e.pick;
  return out;
}

LazyChoice choose_kernel_lazily(const std::string& key, const KernelCtx& k,
                                const std::vector<TensorType>& outs,
                                const std::vector<LazyCandidate>& candidates) {
  std::vector<std::unique_ptr<Kernel>> built(candidates.size());
  std::vector<Buffer> bufs;  // the scratch tensors' memory, made at the first timed call
  std::vector<Tensor> in, out;
  std::vector<KernelCandidate> timed;
  for (size_t i = 0; i < candidates.size(); ++i)
    timed.push_back({candidates[i].name, [&, i] {
                       if (!built[i]) built[i] = candidates[i].make();
                       if (bufs.empty()) {
                         auto add = [&](const TensorType& t, std::vector<Tensor>& to) {
                           bufs.emplace_back(std::max<size_t>(t.nbytes(), 64));
                           to.push_back({t.dtype, t.shape, bufs.back().data()});
                         };
                         for (int j = 0; j < k.node.num_inputs(); ++j) {
                           if (k.node.has_input(j))
                             add(k.node.input(j), in);
                           else  // an absent optional input (a convolution's bias)
                             in.push_back(Tensor{});
                         }
                         for (const auto& t : outs) add(t, out);
                       }
                       built[i]->run(in.data(), out.data());
                     }});
  LazyChoice r{choose_kernel(key, k.threads, timed), nullptr};
  r.built = std::move(built[r.choice.pick]);
  return r;
}

}  // namespace ts

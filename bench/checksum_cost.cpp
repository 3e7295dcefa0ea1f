// What the per-tensor checksums cost on a state of SIZE MiB (default 100):
// loading the same tensors from a file with checksums and from one without
// (the reader then skips hashing), alternately, and saving against hashing
// alone. The files sit in the page cache, so the load is memory-bound and the
// hash's share is as large as it gets; from disk it is smaller still.
//   build/bench_checksums [SIZE_MIB] [ROUNDS] [DIR]   in-process figures
//   build/bench_checksums make SIZE_MIB DIR           writes the two files and keeps them
//   build/bench_checksums load FILE                   one load, for farm-bench:
//     farm-bench -n 30 --vs 'build/bench_checksums load DIR/bench_plain.ckpt'
//       -- build/bench_checksums load DIR/bench_checksums.ckpt    (one line)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/checksum.h"
#include "io/safetensors.h"

namespace {

double seconds_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The file as a writer from before checksums wrote it.
void write_without_checksums(const std::string& src, const std::string& dst) {
  std::string bytes = ts::read_file(src);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  for (const char* k : {ts::kChecksumAlgorithmKey, ts::kTensorChecksumsKey, ts::kHeaderChecksumKey})
    h["__metadata__"].erase(k);
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  out += text;
  out.append(bytes, 8 + n, std::string::npos);
  ts::write_file_atomic(dst, out.data(), out.size());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "load" && argc > 2) {
    ts::SafeTensors st = ts::read_safetensors(argv[2]);
    return st.tensors.empty();
  }
  const bool make_only = mode == "make";
  const int a0 = make_only ? 1 : 0;
  const size_t mib = argc > a0 + 1 ? std::strtoul(argv[a0 + 1], nullptr, 10) : 100;
  const int rounds = !make_only && argc > 2 ? std::atoi(argv[2]) : 9;
  const std::string dir = make_only ? (argc > 3 ? argv[3] : "/tmp") : argc > 3 ? argv[3] : "/tmp";
  // A model-like state: 25 tensors of 4 MiB per 100 MiB.
  const int64_t per = 1 << 20;  // floats per tensor
  const size_t count = std::max<size_t>(1, mib / 4);
  std::vector<ts::HostTensor> tensors;
  ts::NamedTensors named;
  for (size_t i = 0; i < count; ++i) {
    tensors.emplace_back(ts::DType::F32, ts::Shape{per});
    float* p = tensors.back().view.as<float>();
    for (int64_t j = 0; j < per; ++j) p[j] = static_cast<float>((i * 7919 + j) % 1000) * 1e-3f;
  }
  for (size_t i = 0; i < count; ++i) named.emplace_back("t" + std::to_string(i), &tensors[i].view);
  const double mb = count * per * 4 / 1048576.0;
  const std::string with = dir + "/bench_checksums.ckpt", without = dir + "/bench_plain.ckpt";

  std::vector<double> save, hash, load_with, load_without;
  ts::write_safetensors(with, {{"format", "bench"}}, named);
  write_without_checksums(with, without);
  if (make_only) {
    std::printf("wrote %s and %s (%.0f MiB each)\n", with.c_str(), without.c_str(), mb);
    return 0;
  }
  // Alternate which goes first: the first load of a pair runs into the
  // memory the previous one just freed, and so pays differently.
  for (int r = 0; r < rounds; ++r) {
    auto a = [&] { load_with.push_back(seconds_of([&] { (void)ts::read_safetensors(with); })); };
    auto b = [&] { load_without.push_back(seconds_of([&] { (void)ts::read_safetensors(without); })); };
    if (r % 2) { b(); a(); } else { a(); b(); }
  }
  for (int r = 0; r < rounds; ++r) {
    save.push_back(seconds_of([&] { ts::write_safetensors(with, {{"format", "bench"}}, named); }));
    hash.push_back(seconds_of([&] {
      for (const auto& [n, t] : named) (void)ts::checksum_hex(t->data, t->nbytes());
    }));
  }
  const double lw = median(load_with), lo = median(load_without), s = median(save),
               h = median(hash);
  const double lw_min = *std::min_element(load_with.begin(), load_with.end()),
               lo_min = *std::min_element(load_without.begin(), load_without.end());
  std::printf("state %.0f MiB in %zu tensors, %d rounds (medians; minima in brackets)\n", mb,
              count, rounds);
  std::printf("load with checksums %.1f ms [%.1f], without %.1f ms [%.1f]: checksum cost "
              "%+.1f%% [%+.1f%%] of the load\n",
              lw * 1e3, lw_min * 1e3, lo * 1e3, lo_min * 1e3, (lw - lo) / lo * 100,
              (lw_min - lo_min) / lo_min * 100);
  std::printf("save (with fsync) %.1f ms, of which hashing %.1f ms: %.1f%% of the save\n", s * 1e3,
              h * 1e3, h / s * 100);
  std::printf("hash throughput %.1f GB/s\n", mb * 1048576 / h / 1e9);
  std::remove(with.c_str());
  std::remove(without.c_str());
  return 0;
}

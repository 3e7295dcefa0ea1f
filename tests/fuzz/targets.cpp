#include "targets.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "trainstep/bfloat16.h"
#include "../cpp/tiny_artifact.h"
#include "data/idx.h"
#include "data/image_decode.h"
#include "data/image_transform.h"
#include "data/npy.h"
#include "data/shards.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "ir/program.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "trainstep/train.h"
#include "trainstep/error.h"
#include "trainstep/session.h"

namespace ts_fuzz {

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what);
  std::abort();
}

// A private scratch folder (RAM-backed when /dev/shm exists) for targets
// whose parser reads a file.
const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string t = std::string(base) + "/trainstep_fuzz_XXXXXX";
    if (!mkdtemp(t.data())) broken("cannot create a scratch folder");
    return t;
  }();
  return dir;
}

std::string write_scratch(const char* name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) broken("cannot write the scratch file");
  for (size_t done = 0; done < size;) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) broken("cannot write the scratch file");
    done += size_t(w);
  }
  close(fd);
  return path;
}

// Runs verified functions only when one step is cheap, so the fuzzer keeps
// its pace (a step in milliseconds) and no input can ask for gigabytes:
// every value (and every unused declared output, which kernels may size
// scratch by) at most kRunMaxElems elements, and the arena plus bound
// inputs at most kRunMaxBytes. The seeds' small programs fit; MNIST's
// batch-64 steps do not (their passes and plan are still fuzzed).
constexpr int64_t kRunMaxElems = 64 * 1024;
constexpr size_t kRunMaxBytes = 4u << 20;

// One compile variant per input, from a hash of its bytes: across the
// corpus both paths of each pass get covered, and one input is still one
// deterministic run. A quarter of the runs get hostile integer inputs, a
// quarter skip cleanup (dead nodes stay: kernels with unused outputs).
struct Variant {
  ts::CompileOptions compile;
  bool hostile = false;
};

Variant variant(const uint8_t* data, size_t size) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 16777619u;
  h ^= h >> 16;  // FNV's low bits depend on the bytes' low bits only: mix
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  Variant v;
  v.compile.fusion = h & 1;
  v.compile.inplace = h & 2;
  v.hostile = ((h >> 2) & 3) == 0;
  v.compile.cleanup = ((h >> 4) & 3) != 0;
  return v;
}

bool small_enough_to_run(const ts::Function& f, const ts::MemoryPlan& plan) {
  for (const auto& t : f.value_types)
    if (t.numel() > kRunMaxElems) return false;
  for (const auto& n : f.nodes)
    for (const auto& t : n.declared)
      if (t.numel() > kRunMaxElems) return false;
  size_t bytes = plan.arena_bytes;
  for (const auto& in : f.inputs) bytes += in.type.nbytes();
  return bytes <= kRunMaxBytes;
}

// Deterministic input bytes valid for the dtype: floats from a small
// pattern with zeros and negatives; integers in [0, 4) (plausible class
// labels and indices), or with `hostile` also negative and huge ones, which
// index kernels must refuse with a ts::Error; bools 0/1.
void fill(const ts::HostTensor& t, bool hostile) {
  const int64_t n = t.view.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = (i * 7 + 3) % 11;
    const int64_t v = hostile && k >= 8 ? (k == 8 ? -1 : k == 9 ? INT32_MAX : INT64_MIN) : k % 4;
    switch (t.view.dtype) {
      case ts::DType::F32: t.view.as<float>()[i] = float(k - 5) / 4; break;
      case ts::DType::F64: t.view.as<double>()[i] = double(k - 5) / 4; break;
      case ts::DType::I64: t.view.as<int64_t>()[i] = v; break;
      case ts::DType::I32: t.view.as<int32_t>()[i] = int32_t(v); break;
      case ts::DType::U8: t.view.as<uint8_t>()[i] = uint8_t(v); break;
      case ts::DType::Bool: t.view.as<uint8_t>()[i] = k & 1; break;
      case ts::DType::BF16: t.view.as<uint16_t>()[i] = ts::float_to_bf16(float(k - 5) / 4); break;
    }
  }
}

// Builds every kernel (make) and runs one step with every input bound, on
// one thread: a team's barriers cost more than these small steps, and the
// gtest replay's later tests get their OpenMP thread count back.
void run_once(const ts::Function& f, ts::MemoryPlan plan, bool hostile) {
  struct RestoreThreads {
    int n = omp_get_max_threads();
    ~RestoreThreads() { omp_set_num_threads(n); }
  } restore;
  ts::Executor ex(f, /*threads=*/1, std::move(plan));
  std::vector<ts::HostTensor> in;
  in.reserve(f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    in.emplace_back(f.inputs[i].type.dtype, f.inputs[i].type.shape);
    fill(in.back(), hostile);
    ex.bind_input(int(i), in.back().view.data);
  }
  ex.run();
}

}  // namespace

void program(const uint8_t* data, size_t size) {
  ts::json j = ts::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  const Variant v = variant(data, size);
  try {
    ts::Program p = ts::parse_program(j, "fuzz.tstep");
    std::vector<std::pair<ts::Function, ts::MemoryPlan>> compiled;
    for (const auto& [name, f] : p.functions) {
      ts::Function copy = f;
      ts::optimize(copy, v.compile);
      ts::MemoryPlan plan = ts::plan_memory(copy, v.compile.inplace);
      compiled.emplace_back(std::move(copy), std::move(plan));
    }
    for (auto& [f, plan] : compiled)
      if (small_enough_to_run(f, plan)) run_once(f, std::move(plan), v.hostile);
  } catch (const ts::Error&) {
  }
}

void ir_text(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string printed;
  try {
    printed = ts::print_function(ts::parse_function(text));
  } catch (const ts::Error&) {
    return;
  }
  std::string again;
  try {
    again = ts::print_function(ts::parse_function(printed));
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "%s\n%s\n", printed.c_str(), e.what());
    broken("a printed function does not parse");
  }
  if (again != printed) broken("print(parse(print(f))) differs from print(f)");
  const Variant v = variant(data, size);
  try {
    ts::Function f = ts::parse_function(printed);
    ts::optimize(f, v.compile);
    ts::MemoryPlan plan = ts::plan_memory(f, v.compile.inplace);
    if (small_enough_to_run(f, plan)) run_once(f, std::move(plan), v.hostile);
  } catch (const ts::Error&) {
  }
}

void safetensors(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ts::SafeTensors st;
  try {
    st = ts::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const ts::Error&) {
    return;
  }
  ts::NamedTensors named;
  for (const auto& [n, t] : st.tensors) named.emplace_back(n, &t.view);
  const std::string written = ts::serialize_safetensors(st.metadata, named);
  ts::SafeTensors back = ts::parse_safetensors(written, "again");
  // The writer adds (or recomputes) the checksums; the rest must survive.
  auto plain = [](std::map<std::string, std::string> m) {
    ts::strip_checksums(m);
    return m;
  };
  if (!back.checksummed || plain(back.metadata) != plain(st.metadata) ||
      back.tensors.size() != st.tensors.size())
    broken("a parsed file does not round-trip");
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    const ts::Tensor &a = st.tensors[i].second.view, &b = back.tensors[i].second.view;
    if (back.tensors[i].first != st.tensors[i].first || a.type() != b.type() ||
        std::memcmp(a.data, b.data, a.nbytes()) != 0)
      broken("a parsed tensor does not round-trip");
  }
  // One flipped bit anywhere in a written file (header or data) is caught.
  std::string flipped = written;
  const size_t bit = std::hash<std::string>{}(bytes) % (flipped.size() * 8);
  flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
  try {
    ts::parse_safetensors(flipped, "flipped");
  } catch (const ts::Error&) {
    return;
  }
  broken("a flipped bit in a checksummed file went unnoticed");
}

void checkpoint(const uint8_t* data, size_t size) {
  static std::unique_ptr<ts::Session> s =
      ts::Session::open(ts_test::write_tiny_artifact(scratch_dir()));
  s->reset_state();
  s->set_step(7);
  const std::string path = write_scratch("fuzz.ckpt", data, size);
  const ts::Tensor& w = s->state("w");
  const std::string before(static_cast<char*>(w.data), w.nbytes());
  ts::CheckpointMeta meta;
  try {
    meta = s->load_checkpoint(path);
  } catch (const ts::Error&) {
    if (std::string(static_cast<char*>(w.data), w.nbytes()) != before || s->step() != 7)
      broken("a rejected checkpoint changed the session");
    return;
  }
  try {
    ts::resume_position(meta, path);
  } catch (const ts::Error&) {
  }
}

void idx(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("fuzz.idx", data, size);
  try {
    ts::read_idx(path);
  } catch (const ts::Error&) {
  }
}

void npz(const uint8_t* data, size_t size) {
  try {
    ts::read_npz_bytes(data, size, "fuzz.npz");
  } catch (const ts::Error&) {
  }
  if (size >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) {
    try {
      ts::parse_npy(data, size, "fuzz.npy");
    } catch (const ts::Error&) {
    }
  }
}

void shards(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ts::parse_shard_index(text, "index.json");
  } catch (const ts::Error&) {
  }
  try {
    const ts::SafeTensorsLayout l = ts::parse_safetensors_layout(text.data(), text.size(), "shard");
    for (const auto& e : l.entries)
      if (ts::checksum_hex(text.data() + l.data_offset + e.begin, e.end - e.begin).size() != 16) abort();
  } catch (const ts::Error&) {
  }
}

void image(const uint8_t* data, size_t size) {
  ts::RgbImage img;
  try {
    ts::decode_image(data, size, "fuzz.img", img, int64_t{1} << 20);
  } catch (const ts::Error&) {
    return;
  }
  ts::ImageTransform t;
  t.size = 7;
  t.resize = 9;
  std::vector<float> out(3 * 7 * 7);
  ts::transform_eval(img, t, out.data());
  ts::SampleRng rng(size);
  ts::transform_train(img, t, ts::random_crop(t, img.h, img.w, rng), out.data());
}

const std::vector<NamedTarget>& all_targets() {
  static const std::vector<NamedTarget> t = {{"program", program},
                                             {"ir_text", ir_text},
                                             {"safetensors", safetensors},
                                             {"checkpoint", checkpoint},
                                             {"idx", idx},
                                             {"npz", npz},
                                             {"shards", shards},
                                             {"image", image}};
  return t;
}

}  // namespace ts_fuzz

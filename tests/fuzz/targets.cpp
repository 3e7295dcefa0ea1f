#include "targets.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "../cpp/tiny_artifact.h"
#include "data/idx.h"
#include "io/checksum.h"
#include "io/safetensors.h"
#include "ir/program.h"
#include "ir/text.h"
#include "passes/pipeline.h"
#include "runtime/memory_plan.h"
#include "train/trainer.h"
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

}  // namespace

void program(const uint8_t* data, size_t size) {
  ts::json j = ts::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  try {
    ts::Program p = ts::parse_program(j, "fuzz.tstep");
    for (const auto& [name, f] : p.functions) {
      ts::Function copy = f;
      ts::optimize(copy, ts::CompileOptions{});
      ts::plan_memory(copy, true);
    }
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
  try {
    ts::Function f = ts::parse_function(printed);
    ts::optimize(f, ts::CompileOptions{});
    ts::plan_memory(f, true);
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
  std::map<std::string, std::string> meta;
  try {
    meta = s->load_checkpoint(path);
  } catch (const ts::Error&) {
    if (std::string(static_cast<char*>(w.data), w.nbytes()) != before || s->step() != 7)
      broken("a rejected checkpoint changed the session");
    return;
  }
  try {
    ts::read_resume_point(meta, path);
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

const std::vector<NamedTarget>& all_targets() {
  static const std::vector<NamedTarget> t = {{"program", program},
                                             {"ir_text", ir_text},
                                             {"safetensors", safetensors},
                                             {"checkpoint", checkpoint},
                                             {"idx", idx}};
  return t;
}

}  // namespace ts_fuzz

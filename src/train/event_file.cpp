#include "train/event_file.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "io/crc32c.h"
#include "trainstep/error.h"

namespace ts {

namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | wire_type);
}

// Little-endian, as protobuf's fixed fields and TFRecord's length are.
template <typename T>
void put_le(std::string& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and aarch64 Linux are little-endian
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, kFixed64);
  put_le(e, wall_time);
  if (step != 0) {  // proto3 leaves a zero out, so the bytes are protobuf's own
    put_key(e, 2, kVarint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

std::string error_text() { return std::strerror(errno); }

}  // namespace

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

std::string tfrecord(const std::string& data) {
  std::string r;
  put_le<uint64_t>(r, data.size());
  put_le<uint32_t>(r, mask_crc32c(crc32c(r.data(), 8)));
  r += data;
  put_le<uint32_t>(r, mask_crc32c(crc32c(data.data(), data.size())));
  return r;
}

std::string version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string scalars_event(double wall_time, int64_t step, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, 1, tag);
    put_key(value, 2, kFixed32);
    put_le(value, v);
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

EventFile::EventFile(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir + ": cannot create the log folder: " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = wall_time_now();
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." +
                                         std::to_string(static_cast<long long>(now)) + "." + host +
                                         "." + std::to_string(getpid()) + ".trainstep"))
              .string();
  f_ = std::fopen(path_.c_str(), "ab");
  if (!f_) fail(path_ + ": cannot write the event file: " + error_text());
  append(version_event(now));
  flush();
}

EventFile::~EventFile() {
  if (f_) std::fclose(f_);
}

void EventFile::write(int64_t step, const Scalars& values, double wall_time) {
  append(scalars_event(wall_time, step, values));
}

void EventFile::append(const std::string& event) {
  const std::string r = tfrecord(event);
  if (std::fwrite(r.data(), 1, r.size(), f_) != r.size())
    fail(path_ + ": cannot write the event file: " + error_text());
}

void EventFile::flush() {
  if (std::fflush(f_) != 0) fail(path_ + ": cannot write the event file: " + error_text());
}

}  // namespace ts

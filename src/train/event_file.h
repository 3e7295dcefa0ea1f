// TensorBoard event files: what `train --log-dir` writes for TensorBoard to
// plot (trainstep/metrics_log.h drives it).
//
// An event file is a sequence of TFRecords: uint64 length (little-endian),
// masked CRC-32C of those 8 bytes, the data, masked CRC-32C of the data
// (io/crc32c.h). Each record's data is a serialized tensorflow.Event; the
// first holds file_version "brain.Event:2", every later one a Summary of
// scalars. The few protobuf fields are encoded by hand (no protobuf
// dependency for five fields):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ts {

using Scalars = std::vector<std::pair<std::string, float>>;

// Protobuf's base-128 varint, appended to `out`.
void put_varint(std::string& out, uint64_t v);
// One TFRecord framing `data`.
std::string tfrecord(const std::string& data);
// A serialized Event: the file-version one, and one of scalars at a step.
std::string version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const Scalars& values);

// Seconds since the Unix epoch, as events carry it.
double wall_time_now();

// Appends events to a new file DIR/events.out.tfevents.<time>.<host>.<pid>.trainstep
// (DIR is created). Errors are ts::Error naming the file.
class EventFile {
 public:
  explicit EventFile(const std::string& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  void write(int64_t step, const Scalars& values, double wall_time = wall_time_now());
  void flush();  // to the OS, so TensorBoard sees the records now
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace ts

// Crash-safe file writes (temp file + fsync + rename + directory fsync) and
// readers, all reporting failures as one-line ts::Error.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/file.h"

namespace ts {

// A piece of the file's contents; chunks are written back to back.
using Chunk = std::pair<const void*, size_t>;

// write_file_atomic(path, data, n), of one piece, is public
// (trainstep/file.h); this one writes chunks back to back, with the same
// guarantee and errors.
void write_file_atomic(const std::string& path, const std::vector<Chunk>& chunks);

// Reads the whole file. Throws "PATH: no such file" / "PATH: cannot read: ...".
std::string read_file(const std::string& path);

// A file read front to back in pieces straight into the caller's memory
// (no intermediate copy). Same errors as read_file; read() of more bytes
// than are left fails with "PATH: truncated".
class FileReader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  size_t size() const { return size_; }  // at open time
  void read(void* dst, size_t n);
  std::string read_rest();  // from here to EOF, however long the file is by then

 private:
  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
};

}  // namespace ts

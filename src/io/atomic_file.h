// Crash-safe file writes (temp file + fsync + rename + directory fsync) and a
// whole-file reader, both reporting failures as one-line ts::Error.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ts {

// A piece of the file's contents; chunks are written back to back.
using Chunk = std::pair<const void*, size_t>;

// Writes `data` to `path` atomically: readers see the old file or the new
// one, never a partial write. Throws ts::Error naming path and errno text.
void write_file_atomic(const std::string& path, const void* data, size_t n);
void write_file_atomic(const std::string& path, const std::vector<Chunk>& chunks);

// Reads the whole file. Throws "PATH: no such file" / "PATH: cannot read: ...".
std::string read_file(const std::string& path);

}  // namespace ts

// Crash-safe file writes, public: what the library writes its own files with
// (artifacts' tensors, checkpoints, logs), for a program that writes results
// beside them (the CLI's SVG pictures) and wants the same guarantee.
#pragma once
#include <cstddef>
#include <string>

namespace ts {

// Writes `data` to `path` atomically (temp file + fsync + rename + directory
// fsync): readers see the old file or the new one, never a partial write,
// even after a crash. Throws ts::Error naming path and the errno text.
void write_file_atomic(const std::string& path, const void* data, size_t n);

}  // namespace ts

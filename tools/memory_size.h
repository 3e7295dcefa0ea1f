// `--max-memory SIZE`: "512M", "2G", "1.5GiB", "1073741824" -> bytes
// (K/M/G/T are powers of 1024). A command-line format, so it lives with the
// CLI; the library takes bytes (SessionOptions::max_memory).
#pragma once
#include <cstddef>
#include <string>

namespace tscli {

// Throws ts::Error naming the text and the forms it accepts.
size_t parse_memory_size(const std::string& text);

}  // namespace tscli

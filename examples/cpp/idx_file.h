// Reads the IDX files of MNIST and Fashion-MNIST (gzipped or not) for the
// example programs, which bring their own data: trainstep's built-in
// datasets are opened by name instead (trainstep/dataset.h, open_dataset).
#pragma once
#include <trainstep/error.h>
#include <zlib.h>

#include <string>
#include <vector>

namespace example {

// The payload of an IDX file (gzipped or not): big-endian dims, then bytes.
inline std::vector<unsigned char> read_idx(const std::string& path, int rank) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ts::Error(path + ": cannot open");
  unsigned char head[4 + 4 * 3];
  const int head_bytes = 4 + 4 * rank;
  if (gzread(f, head, head_bytes) != head_bytes || head[2] != 0x08 || head[3] != rank)
    throw ts::Error(path + ": not an IDX file of unsigned bytes, rank " + std::to_string(rank));
  size_t n = 1;
  for (int d = 0; d < rank; ++d) {
    const unsigned char* b = head + 4 + 4 * d;
    n *= (size_t(b[0]) << 24) | (size_t(b[1]) << 16) | (size_t(b[2]) << 8) | b[3];
  }
  std::vector<unsigned char> data(n);
  const bool ok = gzread(f, data.data(), unsigned(n)) == int(n);
  gzclose(f);
  if (!ok) throw ts::Error(path + ": truncated");
  return data;
}

}  // namespace example

// The IDX format of MNIST / Fashion-MNIST: magic 00 00 <type> <rank>, rank
// big-endian u32 dims, then the elements. Files may be plain or gzipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Only element type 0x08 (unsigned byte) and ranks 1..4 are accepted.
IdxArray read_idx(const std::string& path);

struct ImageDataset {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> images;  // n * rows * cols
  std::vector<uint8_t> labels;  // n
};

// `dir` holds {train,t10k}-{images-idx3,labels-idx1}-ubyte, each plain or .gz.
ImageDataset load_idx_split(const std::string& dir, bool train);

}  // namespace ts

// The IDX format of MNIST / Fashion-MNIST: magic 00 00 <type> <rank>, rank
// big-endian u32 dims, then the elements. Files may be plain or gzipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trainstep/dataset.h"

namespace ts {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Only element type 0x08 (unsigned byte) and ranks 1..4 are accepted.
IdxArray read_idx(const std::string& path);

// Greyscale images with class labels. A sample is field "x", one float32
// image [rows, cols] whose pixels become (x/255 - mean) / std, as
// torchvision's ToTensor + Normalize (the seed's MNIST values by default),
// and field "y", one int64 label.
struct ImageDataset : Dataset {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> images;  // n * rows * cols
  std::vector<uint8_t> labels;  // n
  float mean = 0.1307f, std = 0.3081f;

  int64_t size() const override { return n; }
  std::string describe() const override;
  std::vector<Field> fields() const override;
  void read(int64_t i, const ReadContext& c, void* const* out) const override;
};

// The same images as their own targets (autoencoders): fields "x" and "y"
// are both float32 pixels x / 255 in [0, 1], as torchvision's ToTensor
// gives them.
struct ImageReconstructionDataset : Dataset {
  ImageDataset images;

  explicit ImageReconstructionDataset(ImageDataset d) : images(std::move(d)) {}
  int64_t size() const override { return images.n; }
  std::string describe() const override;
  std::vector<Field> fields() const override;
  void read(int64_t i, const ReadContext& c, void* const* out) const override;
};

// `dir` holds {train,t10k}-{images-idx3,labels-idx1}-ubyte, each plain or .gz.
ImageDataset load_idx_split(const std::string& dir, bool train);

}  // namespace ts

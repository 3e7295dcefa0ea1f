#include "data/idx.h"
#include "trainstep/error.h"

namespace ts {

std::string ImageDataset::describe() const {
  return std::to_string(rows) + "x" + std::to_string(cols) + " images with int64 labels";
}

std::vector<Field> ImageDataset::fields() const {
  return {{"x", DType::F32, {rows, cols}}, {"y", DType::I64, {}}};
}

void ImageDataset::read(int64_t i, const ReadContext&, void* const* out) const {
  const int64_t pix = rows * cols;
  if (float* dst = static_cast<float*>(out[0])) {
    const uint8_t* src = images.data() + i * pix;
    // Divisions, not reciprocals: the same rounding as torchvision's transforms.
    for (int64_t k = 0; k < pix; ++k) dst[k] = (static_cast<float>(src[k]) / 255.0f - mean) / std;
  }
  if (out[1]) *static_cast<int64_t*>(out[1]) = labels[i];
}

std::string ImageReconstructionDataset::describe() const {
  return std::to_string(images.rows) + "x" + std::to_string(images.cols) +
         " images as their own float32 targets";
}

std::vector<Field> ImageReconstructionDataset::fields() const {
  return {{"x", DType::F32, {images.rows, images.cols}}, {"y", DType::F32, {images.rows, images.cols}}};
}

void ImageReconstructionDataset::read(int64_t i, const ReadContext&, void* const* out) const {
  const int64_t pix = images.rows * images.cols;
  const uint8_t* src = images.images.data() + i * pix;
  for (int f = 0; f < 2; ++f)
    if (float* dst = static_cast<float*>(out[f]))
      for (int64_t k = 0; k < pix; ++k) dst[k] = static_cast<float>(src[k]) / 255.0f;
}

}  // namespace ts

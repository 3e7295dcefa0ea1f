#include "data/idx.h"
#include "trainstep/error.h"

namespace ts {

std::string ImageDataset::describe() const {
  return std::to_string(rows) + "x" + std::to_string(cols) + " images with int64 labels";
}

void ImageDataset::check(int64_t batch, const TensorType& x, const TensorType& y) const {
  if (x.dtype != DType::F32 || x.numel() != batch * rows * cols)
    fail("the model input is " + x.str() + ", but the data gives batches of " +
         std::to_string(batch) + " " + describe());
  if (y.dtype != DType::I64 || y.numel() != batch)
    fail("the target is " + y.str() + ", but the data gives int64[" + std::to_string(batch) +
         "] labels");
}

void ImageDataset::write(int64_t i, int64_t r, const Tensor& x, const Tensor& y) const {
  const int64_t pix = rows * cols;
  const uint8_t* src = images.data() + i * pix;
  float* dst = x.as<float>() + r * pix;
  // Divisions, not reciprocals: the same rounding as torchvision's transforms.
  for (int64_t k = 0; k < pix; ++k) dst[k] = (static_cast<float>(src[k]) / 255.0f - mean) / std;
  y.as<int64_t>()[r] = labels[i];
}

std::string ImageReconstructionDataset::describe() const {
  return std::to_string(images.rows) + "x" + std::to_string(images.cols) +
         " images as their own float32 targets";
}

void ImageReconstructionDataset::check(int64_t batch, const TensorType& x, const TensorType& y) const {
  const int64_t pix = images.rows * images.cols;
  for (auto [t, what] : {std::pair{&x, "model input"}, std::pair{&y, "target"}})
    if (t->dtype != DType::F32 || t->numel() != batch * pix)
      fail(std::string("the ") + what + " is " + t->str() + ", but the data gives batches of " +
           std::to_string(batch) + " " + describe() + " (float32, " + std::to_string(pix) +
           " values per sample)");
}

void ImageReconstructionDataset::write(int64_t i, int64_t r, const Tensor& x, const Tensor& y) const {
  const int64_t pix = images.rows * images.cols;
  const uint8_t* src = images.images.data() + i * pix;
  float* dx = x.as<float>() + r * pix;
  float* dy = y.as<float>() + r * pix;
  for (int64_t k = 0; k < pix; ++k) dx[k] = dy[k] = static_cast<float>(src[k]) / 255.0f;
}

}  // namespace ts

#include "data/batcher.h"

#include <cstring>

#include "trainstep/error.h"

namespace ts {

namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

Batcher::Batcher(const ImageDataset& d, int64_t batch, float mean, float std)
    : d_(d), batch_(batch) {
  for (int i = 0; i < 256; ++i) lut_[i] = (static_cast<float>(i) / 255.0f - mean) / std;
  sequential();
}

void Batcher::sequential() {
  order_.resize(d_.n);
  for (int64_t i = 0; i < d_.n; ++i) order_[i] = i;
}

void Batcher::shuffle(uint64_t seed, int64_t epoch) {
  sequential();
  uint64_t s = seed * 0x100000001B3ull + static_cast<uint64_t>(epoch);
  for (int64_t i = d_.n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(splitmix64(s) % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

int64_t Batcher::fill(int64_t b, const Tensor& x, const Tensor& y) const {
  const int64_t pix = d_.rows * d_.cols;
  if (x.dtype != DType::F32 || x.numel() != batch_ * pix)
    fail("the model input is " + x.type().str() + ", but the data gives batches of " +
         std::to_string(batch_) + " images of " + std::to_string(d_.rows) + "x" +
         std::to_string(d_.cols));
  if (y.dtype != DType::I64 || y.numel() != batch_)
    fail("the target is " + y.type().str() + ", but the data gives int64[" +
         std::to_string(batch_) + "] labels");
  float* xd = x.as<float>();
  int64_t* yd = y.as<int64_t>();
  int64_t real = 0;
  for (int64_t r = 0; r < batch_; ++r) {
    int64_t pos = b * batch_ + r;
    float* dst = xd + r * pix;
    if (pos >= d_.n) {
      std::memset(dst, 0, pix * sizeof(float));
      yd[r] = 0;
      continue;
    }
    const uint8_t* src = d_.images.data() + order_[pos] * pix;
    for (int64_t k = 0; k < pix; ++k) dst[k] = lut_[src[k]];
    yd[r] = d_.labels[order_[pos]];
    ++real;
  }
  return real;
}

}  // namespace ts

// The standard ImageNet-style transforms on a decoded RGB image, written as
// float32 CHW, normalized. Training: torchvision's RandomResizedCrop (its
// get_params, drawn from a seeded stream) then a random horizontal flip.
// Evaluation: Resize (shorter side to `resize`) then CenterCrop.
//
// Resizing is bilinear with antialiasing (a triangle filter widened by the
// downscale factor, as PIL and torch's antialias=True compute it), applied
// to the float image: torchvision's F.resized_crop(..., antialias=True) on
// ToTensor()'s output gives the same values to float rounding. PIL's own
// resize on uint8 images rounds each pass to 8 bits, so it differs from
// both by up to about 1/255 (docs/data.md).
#pragma once
#include <array>
#include <cstdint>

#include "data/image_decode.h"

namespace ts {

struct ImageTransform {
  int64_t size = 224;                              // output size x size
  int64_t resize = 256;                            // evaluation: the shorter side before the centre crop
  double scale_lo = 0.08, scale_hi = 1.0;          // RandomResizedCrop's scale
  double ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;  // ... and aspect ratio range
  double flip = 0.5;                               // probability of a horizontal flip
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // ImageNet's, what pretrained models expect
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// The random part of a training transform: the crop box of the source and the flip.
struct CropParams {
  int64_t top = 0, left = 0, h = 0, w = 0;
  bool flip = false;
};

// A splitmix64 stream, the source of every random draw of a read.
class SampleRng {
 public:
  explicit SampleRng(uint64_t seed) : s_(seed) {}
  uint64_t next();
  double uniform();                // [0, 1), 53 bits
  int64_t below(int64_t n);        // [0, n), n > 0 (next() % n)

 private:
  uint64_t s_;
};

// RandomResizedCrop.get_params (torchvision) for an h x w image, then the
// flip (uniform() < flip), in this order of draws: per attempt, the area
// scale then the log aspect ratio; on success, the top then the left.
CropParams random_crop(const ImageTransform& t, int64_t h, int64_t w, SampleRng& rng);

// Writes the transformed image into dst (3 * size * size floats).
void transform_train(const RgbImage& img, const ImageTransform& t, const CropParams& p, float* dst);
void transform_eval(const RgbImage& img, const ImageTransform& t, float* dst);

}  // namespace ts

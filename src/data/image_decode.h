// JPEG and PNG files to 8-bit RGB pixels, through the libraries everyone
// decodes them with: libjpeg-turbo's TurboJPEG API (accurate integer IDCT
// and fancy upsampling, libjpeg's defaults, so the pixels are PIL's) and
// libspng. Grey, palette and alpha PNGs become RGB as PIL's
// convert("RGB") makes them: grey replicated, palette expanded, alpha
// dropped. Sixteen-bit PNG samples keep their high byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct RgbImage {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> px;  // h * w * 3, row-major, RGB
};

enum class ImageKind { Jpeg, Png, Other };

// By the file's first bytes (its magic number), not its name.
ImageKind sniff_image(const uint8_t* data, size_t size);

// Decodes a whole JPEG or PNG file into img, reusing its buffer. Throws
// ts::Error starting with `name` for anything else: an unknown format, a
// corrupt or truncated file, a CMYK JPEG, or more than max_pixels pixels.
// Safe to call from several threads at once (each call has its own decoder).
void decode_image(const uint8_t* data, size_t size, const std::string& name, RgbImage& img,
                  int64_t max_pixels = int64_t{1} << 28);

}  // namespace ts

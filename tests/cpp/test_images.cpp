// The image path (data/image_decode.h, data/image_transform.h): every seed
// of the image fuzz corpus decodes and every truncation of it is one
// ts::Error or a usable image; the transforms on images whose result
// follows from the definitions (constant images, identity resizes, full
// crops mirrored). tests/python/test_data_images.py compares them with
// torchvision.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/image_decode.h"
#include "data/image_transform.h"
#include "test_util.h"
#include "trainstep/error.h"

using ts_test::error_of;

namespace {

std::vector<std::string> seed_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TRAINSTEP_FUZZ_DIR) + "/corpus/image"))
    out.push_back(e.path().string());
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ts::RgbImage filled(int64_t h, int64_t w, uint8_t r, uint8_t g, uint8_t b) {
  ts::RgbImage img;
  img.h = h, img.w = w;
  for (int64_t k = 0; k < h * w; ++k) img.px.insert(img.px.end(), {r, g, b});
  return img;
}

float normalized(const ts::ImageTransform& t, int c, float v) { return (v / 255.0f - t.mean[c]) / t.std[c]; }

}  // namespace

TEST(ImageDecode, SeedsDecodeAndTruncationsFailCleanly) {
  const auto files = seed_files();
  ASSERT_GE(files.size(), 8u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    const std::string bytes = slurp(f);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    ts::RgbImage img;
    ts::decode_image(p, bytes.size(), f, img);
    EXPECT_EQ(img.px.size(), static_cast<size_t>(img.h * img.w * 3));
    EXPECT_GT(img.h, 0);
    for (size_t n = 0; n < bytes.size(); n += 1 + n / 8) {
      const std::string e = error_of([&] { ts::decode_image(p, n, "cut", img); });
      if (e != "<no error>") EXPECT_EQ(e.rfind("cut: ", 0), 0u) << e;
      else EXPECT_EQ(img.px.size(), static_cast<size_t>(img.h * img.w * 3));  // e.g. a PNG cut after its image data
    }
  }
}

TEST(ImageDecode, RefusesOtherFormatsAndOversizedImages) {
  const std::string gif = "GIF89a....";
  ts::RgbImage img;
  EXPECT_EQ(error_of([&] { ts::decode_image(reinterpret_cast<const uint8_t*>(gif.data()), gif.size(), "a.gif", img); }),
            "a.gif: neither a JPEG nor a PNG file (by its first bytes); images: reads those two");
  for (const auto& f : seed_files()) {
    const std::string bytes = slurp(f);
    const std::string e = error_of([&] {
      ts::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), f, img, 10);
    });
    EXPECT_NE(e.find("more than the limit of 10"), std::string::npos) << e;
  }
}

TEST(ImageTransform, ConstantImagesStayConstant) {
  // Resize weights sum to one, so a constant image resamples to itself; the
  // eval crop beyond a small image is CenterCrop's zero padding.
  const ts::RgbImage img = filled(13, 29, 200, 17, 90);
  ts::ImageTransform t;
  t.size = 11;
  t.resize = 12;
  std::vector<float> out(3 * 11 * 11);
  ts::SampleRng rng(42);
  for (int k = 0; k < 20; ++k) {
    ts::transform_train(img, t, ts::random_crop(t, img.h, img.w, rng), out.data());
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 121; ++i)
        ASSERT_NEAR(out[c * 121 + i], normalized(t, c, c == 0 ? 200 : c == 1 ? 17 : 90), 1e-5);
  }
  t.resize = 5;  // 5 x 11 after the resize: rows 3..7 of the 11x11 crop are image, the rest padding
  ts::transform_eval(img, t, out.data());
  for (int y = 0; y < 11; ++y)
    for (int x = 0; x < 11; ++x) {
      const bool image = y >= 3 && y < 8;
      EXPECT_NEAR(out[y * 11 + x], image ? normalized(t, 0, 200) : normalized(t, 0, 0), 1e-5) << y << "," << x;
    }
}

TEST(ImageTransform, IdentityResizeAndMirroredFullCrop) {
  ts::RgbImage img = filled(6, 6, 0, 0, 0);
  for (size_t k = 0; k < img.px.size(); ++k) img.px[k] = static_cast<uint8_t>(k * 7 % 251);
  ts::ImageTransform t;
  t.size = t.resize = 6;
  t.scale_lo = t.scale_hi = t.ratio_lo = t.ratio_hi = t.flip = 1.0;  // the whole image, always flipped
  std::vector<float> eval(3 * 36), train(3 * 36);
  ts::transform_eval(img, t, eval.data());
  ts::SampleRng rng(1);
  const ts::CropParams p = ts::random_crop(t, 6, 6, rng);
  EXPECT_TRUE(p.top == 0 && p.left == 0 && p.h == 6 && p.w == 6 && p.flip);
  ts::transform_train(img, t, p, train.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 6; ++x) {
        const float v = normalized(t, c, img.px[(y * 6 + x) * 3 + c]);
        // Exact resizes; Normalize as one multiply-add differs from torch's
        // two divisions by float rounding (absolute: the terms cancel near 0).
        EXPECT_NEAR(eval[c * 36 + y * 6 + x], v, 1e-6);
        EXPECT_NEAR(train[c * 36 + y * 6 + (5 - x)], v, 1e-6);
      }
}

TEST(ImageTransform, CropFallsBackToTheCentreWithinTheRatioRange) {
  // A 1000x10 strip: no crop of area >= 8 % with aspect <= 4/3 fits its
  // height, so every attempt fails and get_params takes the full height
  // and round(10 * 4/3) columns, centred.
  ts::ImageTransform t;
  ts::SampleRng rng(3);
  const ts::CropParams p = ts::random_crop(t, 10, 1000, rng);
  EXPECT_EQ(p.h, 10);
  EXPECT_EQ(p.w, static_cast<int64_t>(std::nearbyint(10 * 4.0 / 3.0)));
  EXPECT_EQ(p.top, 0);
  EXPECT_EQ(p.left, (1000 - p.w) / 2);
}

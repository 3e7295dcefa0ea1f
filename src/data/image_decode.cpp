#include "data/image_decode.h"

#include <spng.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include "trainstep/error.h"

namespace ts {

ImageKind sniff_image(const uint8_t* d, size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageKind::Jpeg;
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n >= 8 && std::memcmp(d, png, 8) == 0) return ImageKind::Png;
  return ImageKind::Other;
}

namespace {

void check_size(const std::string& name, int64_t h, int64_t w, int64_t max_pixels) {
  if (h <= 0 || w <= 0) fail(name + ": the image has no pixels (" + std::to_string(w) + "x" + std::to_string(h) + ")");
  if (h > max_pixels / w)
    fail(name + ": " + std::to_string(w) + "x" + std::to_string(h) + " pixels, more than the limit of " +
         std::to_string(max_pixels));
}

void decode_jpeg(const uint8_t* data, size_t size, const std::string& name, RgbImage& img,
                 int64_t max_pixels) {
  // One decompressor per thread, kept: creating one costs more than a
  // small image's decode. TurboJPEG 2.1 can leave a handle unusable after a
  // failed decode, so a failure replaces it.
  struct Handle {
    tjhandle h = tjInitDecompress();
    ~Handle() {
      if (h) tjDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) handle.h = tjInitDecompress();
  if (!handle.h) fail(name + ": cannot start the JPEG decoder: " + tjGetErrorStr2(nullptr));
  tjhandle h = handle.h;
  auto failed = [&](const std::string& what) {
    const std::string msg = name + ": " + what + tjGetErrorStr2(h);
    tjDestroy(h);
    handle.h = nullptr;
    fail(msg);
  };
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  auto* buf = const_cast<unsigned char*>(data);  // TurboJPEG 2.1 takes non-const; it does not write
  const unsigned long len = static_cast<unsigned long>(size);
  if (tjDecompressHeader3(h, buf, len, &w, &ht, &subsamp, &colorspace) != 0) failed("not a readable JPEG: ");
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    fail(name + ": a CMYK JPEG; only RGB and greyscale JPEGs are read (convert it to RGB)");
  check_size(name, ht, w, max_pixels);
  img.h = ht, img.w = w;
  img.px.resize(static_cast<size_t>(w) * ht * 3);
  // A warning about extraneous bytes leaves a usable image, as PIL takes
  // it; a premature end (a truncated file) does not, as PIL refuses it.
  if (tjDecompress2(h, buf, len, img.px.data(), w, 0, ht, TJPF_RGB, 0) != 0) {
    if (tjGetErrorCode(h) != TJERR_WARNING || std::strstr(tjGetErrorStr2(h), "Premature end"))
      failed("corrupt JPEG: ");
    tjDestroy(h);  // see above
    handle.h = nullptr;
  }
}

void decode_png(const uint8_t* data, size_t size, const std::string& name, RgbImage& img,
                int64_t max_pixels) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  if (!ctx) fail(name + ": cannot start the PNG decoder");
  auto check = [&](int rc, const char* what) {
    if (rc != 0) fail(name + ": " + what + ": " + spng_strerror(rc));
  };
  // Bounds on what a hostile header can make the decoder allocate.
  check(spng_set_chunk_limits(ctx.get(), 64u << 20, 64u << 20), "cannot set PNG limits");
  check(spng_set_png_buffer(ctx.get(), data, size), "not a readable PNG");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), "not a readable PNG");
  check_size(name, ihdr.height, ihdr.width, max_pixels);
  size_t out = 0;
  check(spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &out), "unsupported PNG");
  img.h = ihdr.height, img.w = ihdr.width;
  img.px.resize(out);
  check(spng_decode_image(ctx.get(), img.px.data(), out, SPNG_FMT_RGB8, 0), "corrupt PNG");
}

}  // namespace

void decode_image(const uint8_t* data, size_t size, const std::string& name, RgbImage& img,
                  int64_t max_pixels) {
  switch (sniff_image(data, size)) {
    case ImageKind::Jpeg: return decode_jpeg(data, size, name, img, max_pixels);
    case ImageKind::Png: return decode_png(data, size, name, img, max_pixels);
    case ImageKind::Other: break;
  }
  fail(name + ": neither a JPEG nor a PNG file (by its first bytes); images: reads those two");
}

}  // namespace ts

#include "data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/splitmix.h"

namespace ts {

uint64_t SampleRng::next() { return splitmix64(s_); }

double SampleRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int64_t SampleRng::below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

namespace {

// Python's round(): halves to even, which nearbyint does in the default rounding mode.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// One axis of the resize: output pixels [first, first + n) of an in -> out
// resize each take source pixels [lo, lo + len) with weights w[o * taps ..].
// len is 0 outside [0, out): CenterCrop's zero padding.
struct Axis {
  std::vector<int32_t> lo, len;
  std::vector<float> w;
  int taps = 0;
};

// The triangle filter widened by the downscale factor, with PIL's (and
// torch's antialias) centring and edge rules, weights normalized to sum 1.
void axis_weights(int64_t in, int64_t out, int64_t first, int64_t n, Axis& a) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? scale : 1.0;
  const double inv = 1.0 / support;
  a.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.lo.assign(n, 0);
  a.len.assign(n, 0);
  a.w.assign(static_cast<size_t>(n) * a.taps, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t o = first + k;
    if (o < 0 || o >= out) continue;
    const double center = scale * (static_cast<double>(o) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    const int64_t len = std::min<int64_t>(hi - lo, a.taps);
    float* w = a.w.data() + k * a.taps;
    double total = 0;
    for (int64_t j = 0; j < len; ++j) {
      const double x = (static_cast<double>(lo + j) - center + 0.5) * inv;
      total += std::max(0.0, 1.0 - std::fabs(x));
    }
    for (int64_t j = 0; j < len; ++j) {
      const double x = (static_cast<double>(lo + j) - center + 0.5) * inv;
      w[j] = static_cast<float>(total > 0 ? std::max(0.0, 1.0 - std::fabs(x)) / total : 0.0);
    }
    a.lo[k] = static_cast<int32_t>(lo);
    a.len[k] = static_cast<int32_t>(len);
  }
}

// Resizes the region (ry, rx, rh, rw) of img to oh x ow and writes the
// window of it at (wy, wx), size x size, into dst as normalized CHW
// float32, mirrored when flip. Two separable passes through a float
// buffer; the pass down columns runs on whole rows and vectorizes, the
// pass along rows does not, so the order that gives the latter fewer rows
// goes first: down columns first when the window reads more source rows
// than it writes (a downscale), along rows first otherwise.
void resample(const RgbImage& img, int64_t ry, int64_t rx, int64_t rh, int64_t rw, int64_t oh,
              int64_t ow, int64_t wy, int64_t wx, bool flip, const ImageTransform& t, float* dst) {
  thread_local Axis ax, ay;
  thread_local std::vector<float> tmp, acc;
  const int64_t S = t.size, plane = S * S;
  axis_weights(rw, ow, wx, S, ax);
  axis_weights(rh, oh, wy, S, ay);
  int64_t r0 = rh, r1 = 0, c0 = rw, c1 = 0;  // the source rows and columns the window reads
  for (int64_t k = 0; k < S; ++k) {
    if (ay.len[k] > 0) r0 = std::min<int64_t>(r0, ay.lo[k]), r1 = std::max<int64_t>(r1, ay.lo[k] + ay.len[k]);
    if (ax.len[k] > 0) c0 = std::min<int64_t>(c0, ax.lo[k]), c1 = std::max<int64_t>(c1, ax.lo[k] + ax.len[k]);
  }
  if (r1 <= r0 || c1 <= c0) r0 = r1 = c0 = c1 = 0;  // all padding
  // ToTensor's v / 255, then Normalize's (v - mean) / std, as one multiply-add.
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) scale[c] = 1.0f / (255.0f * t.std[c]), shift[c] = -t.mean[c] / t.std[c];
  auto put = [&](int64_t y, int64_t x, const float* v) {
    const int64_t at = y * S + (flip ? S - 1 - x : x);
    const bool pad = ay.len[y] == 0 || ax.len[x] == 0;
    for (int c = 0; c < 3; ++c) dst[c * plane + at] = pad ? shift[c] : v[c] * scale[c] + shift[c];
  };
  // One output pixel from a float row holding source columns [first, ...).
  auto along = [&](const float* row, int64_t first, int64_t x, float* v) {
    const float* w = ax.w.data() + x * ax.taps;
    const float* p = row + (ax.lo[x] - first) * 3;
    v[0] = v[1] = v[2] = 0;
    for (int j = 0; j < ax.len[x]; ++j) {
      v[0] += w[j] * p[3 * j];
      v[1] += w[j] * p[3 * j + 1];
      v[2] += w[j] * p[3 * j + 2];
    }
  };
  if (r1 - r0 > S) {
    const int64_t width = (c1 - c0) * 3;
    tmp.resize(static_cast<size_t>(width));
    for (int64_t y = 0; y < S; ++y) {
      std::fill(tmp.begin(), tmp.end(), 0.0f);
      float* out = tmp.data();
      const float* w = ay.w.data() + y * ay.taps;
      for (int j = 0; j < ay.len[y]; ++j) {
        const uint8_t* src = img.px.data() + ((ry + ay.lo[y] + j) * img.w + rx + c0) * 3;
        const float wj = w[j];
#pragma omp simd
        for (int64_t i = 0; i < width; ++i) out[i] += wj * static_cast<float>(src[i]);
      }
      float v[3] = {0, 0, 0};
      for (int64_t x = 0; x < S; ++x) {
        if (ax.len[x] > 0 && ay.len[y] > 0) along(out, c0, x, v);
        put(y, x, v);
      }
    }
    return;
  }
  // Along rows first: each source row the window reads, converted once.
  const int64_t row = S * 3, width = (c1 - c0) * 3;
  tmp.resize(static_cast<size_t>((r1 - r0) * row));
  acc.resize(static_cast<size_t>(std::max(row, width)));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src = img.px.data() + ((ry + r) * img.w + rx + c0) * 3;
    float* f = acc.data();
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) f[i] = static_cast<float>(src[i]);
    float* out = tmp.data() + (r - r0) * row;
    for (int64_t x = 0; x < S; ++x) {
      if (ax.len[x] > 0) along(f, c0, x, out + 3 * x);
      else out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = 0;
    }
  }
  for (int64_t y = 0; y < S; ++y) {
    std::fill(acc.begin(), acc.begin() + row, 0.0f);
    float* a = acc.data();
    const float* w = ay.w.data() + y * ay.taps;
    for (int j = 0; j < ay.len[y]; ++j) {
      const float* src = tmp.data() + (ay.lo[y] + j - r0) * row;
      const float wj = w[j];
#pragma omp simd
      for (int64_t x = 0; x < row; ++x) a[x] += wj * src[x];
    }
    for (int64_t x = 0; x < S; ++x) put(y, x, a + 3 * x);
  }
}

// CenterCrop's top (or left) of a crop of `crop` from `len`; negative where
// the image is smaller and is padded with zeros, as torchvision pads it.
int64_t centre(int64_t len, int64_t crop) {
  if (len < crop) return -((crop - len) / 2);
  return round_half_even(static_cast<double>(len - crop) / 2.0);
}

}  // namespace

CropParams random_crop(const ImageTransform& t, int64_t h, int64_t w, SampleRng& rng) {
  CropParams p;
  const double area = static_cast<double>(h) * static_cast<double>(w);
  const double log_lo = std::log(t.ratio_lo), log_hi = std::log(t.ratio_hi);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * (t.scale_lo + (t.scale_hi - t.scale_lo) * rng.uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const int64_t cw = round_half_even(std::sqrt(target * aspect));
    const int64_t ch = round_half_even(std::sqrt(target / aspect));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      p.h = ch, p.w = cw;
      p.top = rng.below(h - ch + 1);
      p.left = rng.below(w - cw + 1);
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: the central crop within the ratio range
    const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
    if (in_ratio < std::min(t.ratio_lo, t.ratio_hi)) {
      p.w = w, p.h = round_half_even(static_cast<double>(w) / std::min(t.ratio_lo, t.ratio_hi));
    } else if (in_ratio > std::max(t.ratio_lo, t.ratio_hi)) {
      p.h = h, p.w = round_half_even(static_cast<double>(h) * std::max(t.ratio_lo, t.ratio_hi));
    } else {
      p.w = w, p.h = h;
    }
    p.top = (h - p.h) / 2;
    p.left = (w - p.w) / 2;
  }
  p.flip = rng.uniform() < t.flip;
  return p;
}

void transform_train(const RgbImage& img, const ImageTransform& t, const CropParams& p, float* dst) {
  resample(img, p.top, p.left, p.h, p.w, t.size, t.size, 0, 0, p.flip, t, dst);
}

void transform_eval(const RgbImage& img, const ImageTransform& t, float* dst) {
  // Resize: the shorter side to t.resize, the longer in proportion (truncated, as torchvision's int()).
  int64_t nh, nw;
  if (img.w <= img.h) {
    nw = t.resize;
    nh = static_cast<int64_t>(static_cast<double>(t.resize * img.h) / static_cast<double>(img.w));
  } else {
    nh = t.resize;
    nw = static_cast<int64_t>(static_cast<double>(t.resize * img.w) / static_cast<double>(img.h));
  }
  resample(img, 0, 0, img.h, img.w, nh, nw, centre(nh, t.size), centre(nw, t.size), false, t, dst);
}

}  // namespace ts

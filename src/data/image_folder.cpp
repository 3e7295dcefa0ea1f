#include "data/image_folder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "data/image_decode.h"
#include "data/image_transform.h"
#include "io/atomic_file.h"
#include "trainstep/error.h"

namespace ts {

namespace fs = std::filesystem;

namespace {

constexpr const char* kForm =
    "expected images:DIR:SIZE[:OPTION=VALUE]..., options mean=R,G,B std=R,G,B resize=N "
    "scale=LO,HI ratio=LO,HI flip=P";

[[noreturn]] void bad_spec(const std::string& spec, const std::string& what) {
  fail("bad image dataset '" + spec + "': " + what + "; " + kForm);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// What ImageFolder reads (its IMG_EXTENSIONS): 1 = ours, -1 = its but not ours, 0 = skipped.
int image_extension(const std::string& name) {
  const std::string l = lower(name);
  for (const char* e : {".jpg", ".jpeg", ".png"})
    if (ends_with(l, e)) return 1;
  for (const char* e : {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (ends_with(l, e)) return -1;
  return 0;
}

std::vector<double> numbers(const std::string& spec, const std::string& key, const std::string& v,
                            size_t count) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    const std::string s = v.substr(start, comma - start);
    size_t used = 0;
    double x = NAN;
    try {
      x = std::stod(s, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (s.empty() || used != s.size() || !std::isfinite(x))
      bad_spec(spec, key + "='" + v + "' has '" + s + "', not a number");
    out.push_back(x);
    start = comma + 1;
  }
  if (out.size() != count)
    bad_spec(spec, key + " takes " + std::to_string(count) + " comma-separated numbers, got '" + v + "'");
  return out;
}

int64_t positive(const std::string& spec, const std::string& what, const std::string& s) {
  int64_t v = 0;
  if (s.empty() || s.size() > 6) bad_spec(spec, what + " '" + s + "' is not a positive integer");
  for (char c : s) {
    if (c < '0' || c > '9') bad_spec(spec, what + " '" + s + "' is not a positive integer");
    v = v * 10 + (c - '0');
  }
  if (v <= 0) bad_spec(spec, what + " '" + s + "' is not a positive integer");
  return v;
}

// Parses the spec into the folder and the transform.
std::pair<std::string, ImageTransform> parse(const std::string& spec) {
  const std::string prefix = "images:";
  if (spec.compare(0, prefix.size(), prefix) != 0) bad_spec(spec, "it does not start with 'images:'");
  std::string rest = spec.substr(prefix.size());
  // Options come last, each with '='; then SIZE; DIR is what remains (it may hold ':').
  std::vector<std::pair<std::string, std::string>> options;
  size_t colon;
  while ((colon = rest.rfind(':')) != std::string::npos && rest.find('=', colon) != std::string::npos) {
    const std::string opt = rest.substr(colon + 1);
    const size_t eq = opt.find('=');
    options.emplace_back(opt.substr(0, eq), opt.substr(eq + 1));
    rest.resize(colon);
  }
  colon = rest.rfind(':');
  if (colon == std::string::npos) bad_spec(spec, "no SIZE (the side of the square images the model takes)");
  ImageTransform t;
  t.size = positive(spec, "SIZE", rest.substr(colon + 1));
  std::string dir = rest.substr(0, colon);
  if (dir.empty()) bad_spec(spec, "no DIR");
  t.resize = static_cast<int64_t>(std::nearbyint(static_cast<double>(t.size) / 0.875));  // 224 -> 256
  for (const auto& [k, v] : options) {
    if (k == "mean" || k == "std") {
      const auto n = numbers(spec, k, v, 3);
      for (int c = 0; c < 3; ++c) (k == "mean" ? t.mean : t.std)[c] = static_cast<float>(n[c]);
      if (k == "std" && (n[0] <= 0 || n[1] <= 0 || n[2] <= 0)) bad_spec(spec, "std must be positive");
    } else if (k == "resize") {
      t.resize = positive(spec, "resize", v);
    } else if (k == "scale") {
      const auto n = numbers(spec, k, v, 2);
      if (!(n[0] > 0 && n[0] <= n[1] && n[1] <= 1)) bad_spec(spec, "scale needs 0 < LO <= HI <= 1");
      t.scale_lo = n[0], t.scale_hi = n[1];
    } else if (k == "ratio") {
      const auto n = numbers(spec, k, v, 2);
      if (!(n[0] > 0 && n[0] <= n[1])) bad_spec(spec, "ratio needs 0 < LO <= HI");
      t.ratio_lo = n[0], t.ratio_hi = n[1];
    } else if (k == "flip") {
      const auto n = numbers(spec, k, v, 1);
      if (!(n[0] >= 0 && n[0] <= 1)) bad_spec(spec, "flip is a probability in [0, 1]");
      t.flip = n[0];
    } else {
      bad_spec(spec, "unknown option '" + k + "'");
    }
  }
  return {dir, t};
}

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(std::string dir, ImageTransform t, Split split) : dir_(std::move(dir)), t_(t) {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) fail(dir_ + ": no such folder (images:DIR takes a folder of class folders)");
    std::error_code entry_ec;  // an entry that cannot be stat'ed is not a class folder
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.is_directory(entry_ec)) classes_.push_back(e.path().filename().string());
    if (ec) fail(dir_ + ": cannot list: " + ec.message());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty()) fail(dir_ + ": no class folders (images:DIR takes DIR/CLASS/IMAGE files)");
    std::vector<std::pair<std::string, int64_t>> all;
    for (size_t c = 0; c < classes_.size(); ++c) {
      // ImageFolder's order: directories by path, then files by name.
      std::vector<std::pair<std::string, std::string>> files;
      const fs::path root = fs::path(dir_) / classes_[c];
      for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(entry_ec)) continue;
        const std::string name = it->path().filename().string();
        const int kind = image_extension(name);
        if (kind < 0)
          fail(it->path().string() + ": only JPEG and PNG images are read; convert this file or move it out of " + dir_);
        if (kind > 0) files.emplace_back(it->path().parent_path().string(), name);
      }
      if (ec) fail(root.string() + ": cannot list: " + ec.message());
      if (files.empty()) fail(root.string() + ": class '" + classes_[c] + "' has no .jpg, .jpeg or .png file");
      std::sort(files.begin(), files.end());
      for (auto& [parent, name] : files) all.emplace_back(parent + "/" + name, static_cast<int64_t>(c));
    }
    for (size_t i = 0; i < all.size(); ++i) {
      const bool test = i % 10 == 9;
      if (split == Split::All || test == (split == Split::Test)) {
        paths_.push_back(std::move(all[i].first));
        labels_.push_back(all[i].second);
      }
    }
    if (paths_.empty()) fail(dir_ + ": " + std::to_string(all.size()) + " images, none in the test split (every tenth)");
  }

  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }

  std::string describe() const override {
    return std::to_string(paths_.size()) + " images of " + std::to_string(classes_.size()) + " classes from " +
           dir_ + ", as " + std::to_string(t_.size) + "x" + std::to_string(t_.size) +
           " RGB (random resized crops and flips in training, resize to " + std::to_string(t_.resize) +
           " and centre crop in evaluation)";
  }

  std::vector<Field> fields() const override {
    return {Field{"x", DType::F32, {3, t_.size, t_.size}}, Field{"y", DType::I64, {}}};
  }

  void read(int64_t i, const ReadContext& c, void* const* out) const override {
    if (i < 0 || i >= size())
      fail(dir_ + ": sample " + std::to_string(i) + " out of range [0, " + std::to_string(size()) + ")");
    if (out[1]) *static_cast<int64_t*>(out[1]) = labels_[i];
    float* x = static_cast<float*>(out[0]);
    if (!x) return;
    thread_local RgbImage img;  // decoded pixels: reused, an image's largest buffer
    const std::string& path = paths_[i];
    const std::string bytes = read_file(path);
    decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path, img);
    if (c.train) {
      SampleRng rng(sample_random(c, i));
      transform_train(img, t_, random_crop(t_, img.h, img.w, rng), x);
    } else {
      transform_eval(img, t_, x);
    }
  }

 private:
  std::string dir_;
  ImageTransform t_;
  std::vector<std::string> classes_;
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
};

}  // namespace

std::unique_ptr<Dataset> open_image_folder(const std::string& spec, Split split) {
  auto [dir, t] = parse(spec);
  return std::make_unique<ImageFolderDataset>(std::move(dir), t, split);
}

}  // namespace ts

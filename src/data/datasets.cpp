#include "trainstep/dataset.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "data/idx.h"
#include "data/image_folder.h"
#include "data/npy.h"
#include "data/shards.h"
#include "data/synthetic.h"
#include "data/text.h"
#include "data/tokens.h"
#include "trainstep/error.h"

namespace ts {

namespace {

constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

std::optional<ImageDataset> open_images(const std::string& spec, bool train) {
  if (spec == "fashion-mnist") return load_idx_split(kFashionDir, train);
  if (spec.rfind("idx:", 0) == 0 && spec.size() > 4) return load_idx_split(spec.substr(4), train);
  return std::nullopt;
}

std::vector<std::string> split_colons(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0, colon;
  while ((colon = s.find(':', start)) != std::string::npos) {
    parts.push_back(s.substr(start, colon - start));
    start = colon + 1;
  }
  parts.push_back(s.substr(start));
  return parts;
}

// friedman1[:SIGMA[:N_TRAIN[:N_TEST]]], defaults 1.0, 20000, 10000.
std::unique_ptr<Dataset> open_friedman1(const std::string& spec, bool train) {
  std::vector<std::string> p = split_colons(spec);
  if (p.size() > 4) fail("dataset '" + spec + "': expected friedman1[:SIGMA[:N_TRAIN[:N_TEST]]]");
  auto number = [&](size_t i, const char* what, double def, bool integer) {
    if (i >= p.size()) return def;
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(p[i], &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (p[i].empty() || used != p[i].size() || v < 0 || (integer && (v < 1 || v != std::floor(v))))
      fail("dataset '" + spec + "': " + what + " '" + p[i] + "' is not a " +
           (integer ? "positive integer" : "non-negative number"));
    return v;
  };
  const double sigma = number(1, "SIGMA", 1.0, false);
  const int64_t n_train = static_cast<int64_t>(number(2, "N_TRAIN", 20000, true));
  const int64_t n_test = static_cast<int64_t>(number(3, "N_TEST", 10000, true));
  // Fixed seeds: the data is part of the benchmark, not of a run's --seed.
  return std::make_unique<Friedman1Dataset>(
      make_friedman1(train ? n_train : n_test, sigma, train ? 1 : 2));
}

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// "NAME:T" -> T, the window length of a text dataset (the model's sequence length).
int64_t window_of(const std::string& spec, const std::string& num) {
  size_t used = 0;
  int64_t t = -1;
  try {
    t = std::stoll(num, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (num.empty() || used != num.size() || t <= 0)
    fail("dataset '" + spec + "': '" + num + "' is not a window length (a positive integer: "
         "the model's sequence length)");
  return t;
}

// A text's split; All is the whole text.
TextDataset text_split(std::string name, std::vector<uint8_t> all, int64_t T, Split split) {
  if (split != Split::All) return make_text_split(std::move(name), all, T, split == Split::Train);
  TextDataset d;
  d.name = std::move(name);
  d.bytes = std::move(all);
  d.T = T;
  if (d.size() == 0)
    fail(d.name + ": " + std::to_string(d.bytes.size()) + " bytes, fewer than one window of " +
         std::to_string(T + 1));
  return d;
}

}  // namespace

const char* dataset_specs() {
  return "fashion-mnist | idx:DIR | autoencode:IMAGES | friedman1[:SIGMA[:N_TRAIN[:N_TEST]]] | "
         "fortunes:T | text:FILE:T | npz:FILE | shards:DIR | tokens:FILE:BLOCK[:DTYPE] | "
         "images:DIR:SIZE[:OPTION=VALUE]...";
}

std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split) {
  // Sources with a fixed test split give it for All (docs/data.md).
  const bool train = split == Split::Train;
  if (spec.rfind("npz:", 0) == 0) {
    if (spec.size() == 4) fail("dataset 'npz:' names no file: npz:FILE");
    return open_npz(spec.substr(4), split);
  }
  if (spec.rfind("shards:", 0) == 0) {
    if (spec.size() == 7) fail("dataset 'shards:' names no folder: shards:DIR");
    return open_shards(spec.substr(7), split);
  }
  if (spec.rfind("tokens:", 0) == 0) return open_tokens(spec, split);
  if (spec.rfind("images:", 0) == 0) return open_image_folder(spec, split);
  if (auto d = open_images(spec, train)) return std::make_unique<ImageDataset>(std::move(*d));
  if (spec.rfind("autoencode:", 0) == 0) {
    auto d = open_images(spec.substr(11), train);
    if (!d) fail("dataset '" + spec + "': autoencode takes an image dataset (fashion-mnist | idx:DIR)");
    return std::make_unique<ImageReconstructionDataset>(std::move(*d));
  }
  if (spec == "friedman1" || spec.rfind("friedman1:", 0) == 0) return open_friedman1(spec, train);
  // Text: byte windows of length T; the file (or corpus) comes first.
  if (spec == "fortunes" || spec.rfind("fortunes:", 0) == 0) {
    if (spec == "fortunes") fail("dataset 'fortunes' needs a window length: fortunes:T");
    const int64_t T = window_of(spec, spec.substr(9));
    return std::make_unique<TextDataset>(text_split("fortunes", read_fortunes(kFortunesDir), T, split));
  }
  if (spec.rfind("text:", 0) == 0) {
    const size_t colon = spec.rfind(':');
    if (colon <= 4) fail("dataset '" + spec + "' needs a window length: text:FILE:T");
    const std::string path = spec.substr(5, colon - 5);
    if (path.empty()) fail("dataset '" + spec + "' names no file: text:FILE:T");
    const int64_t T = window_of(spec, spec.substr(colon + 1));
    return std::make_unique<TextDataset>(text_split(path, read_text_file(path), T, split));
  }
  fail("unknown dataset '" + spec + "' (expected " + dataset_specs() + ")");
}

}  // namespace ts

#include "data/dataset.h"

#include "data/idx.h"
#include "data/text.h"
#include "trainstep/error.h"

namespace ts {

namespace {

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

}  // namespace

const char* dataset_specs() { return "fashion-mnist | idx:DIR | fortunes:T | text:FILE:T"; }

std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split) {
  const bool train = split == Split::Train;
  if (spec == "fashion-mnist")
    return std::make_unique<ImageDataset>(load_idx_split("/usr/share/datasets/fashion-mnist", train));
  if (spec.rfind("idx:", 0) == 0 && spec.size() > 4)
    return std::make_unique<ImageDataset>(load_idx_split(spec.substr(4), train));
  // Text: byte windows of length T; the file (or corpus) comes first.
  if (spec == "fortunes" || spec.rfind("fortunes:", 0) == 0) {
    if (spec == "fortunes") fail("dataset 'fortunes' needs a window length: fortunes:T");
    const int64_t T = window_of(spec, spec.substr(9));
    return std::make_unique<TextDataset>(make_text_split("fortunes", read_fortunes(kFortunesDir), T, train));
  }
  if (spec.rfind("text:", 0) == 0) {
    const size_t colon = spec.rfind(':');
    if (colon <= 4) fail("dataset '" + spec + "' needs a window length: text:FILE:T");
    const std::string path = spec.substr(5, colon - 5);
    if (path.empty()) fail("dataset '" + spec + "' names no file: text:FILE:T");
    const int64_t T = window_of(spec, spec.substr(colon + 1));
    return std::make_unique<TextDataset>(make_text_split(path, read_text_file(path), T, train));
  }
  fail("unknown dataset '" + spec + "' (expected " + dataset_specs() + ")");
}

}  // namespace ts

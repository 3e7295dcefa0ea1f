#include "data/dataset.h"

#include "data/idx.h"
#include "trainstep/error.h"

namespace ts {

const char* dataset_specs() { return "fashion-mnist | idx:DIR"; }

std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split) {
  const bool train = split == Split::Train;
  if (spec == "fashion-mnist")
    return std::make_unique<ImageDataset>(load_idx_split("/usr/share/datasets/fashion-mnist", train));
  if (spec.rfind("idx:", 0) == 0 && spec.size() > 4)
    return std::make_unique<ImageDataset>(load_idx_split(spec.substr(4), train));
  fail("unknown dataset '" + spec + "' (expected " + dataset_specs() + ")");
}

}  // namespace ts

// A dataset as the train loop (trainstep/train.h) sees it: `size()` samples,
// each one row of the model input and one row of the target. The loop picks
// which samples go into a batch; the dataset only writes one sample into one
// row. A program's own data source implements this class; the built-in ones
// open by spec string (open_dataset), which is also how the CLI names them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "trainstep/tensor.h"

namespace ts {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // One sample in words, for messages: "28x28 images with int64 labels".
  virtual std::string describe() const = 0;
  // Throws, naming both sides, unless batches of `batch` samples fit the
  // model's input type x and target type y.
  virtual void check(int64_t batch, const TensorType& x, const TensorType& y) const = 0;
  // Writes sample i into row r of x and y (types already checked).
  virtual void write(int64_t i, int64_t r, const Tensor& x, const Tensor& y) const = 0;
};

enum class Split { Train, Test };

// The datasets the CLI knows, by spec string:
//   fashion-mnist   the Debian dataset-fashion-mnist IDX files
//   idx:DIR         MNIST-format IDX files in DIR
//   fortunes:T      Debian's fortune cookies as byte windows of length T (data/text.h)
//   text:FILE:T     any file as byte windows of length T
//   autoencode:IMAGES  one of the above, each image its own float32 target
//   friedman1[:SIGMA[:N_TRAIN[:N_TEST]]]  generated regression (data/synthetic.h)
std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split);

// The spec strings open_dataset accepts, for help texts and errors.
const char* dataset_specs();

}  // namespace ts

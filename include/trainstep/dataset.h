// A dataset as the train loop (trainstep/train.h) sees it: `size()` samples,
// each a set of named fields (token ids, a mask, an image, a label), each
// with a dtype and a per-sample shape. The loop maps the step's input and
// target ports to fields by name (TrainOptions::map overrides it), picks
// which samples go into a batch, and asks the dataset to read one sample
// into one row of each port. A program's own data source implements this
// class; the built-in ones open by spec string (open_dataset), which is
// also how the CLI names them. docs/data.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainstep/tensor.h"

namespace ts {

// One field of every sample: its name, element type and shape (no batch dim).
struct Field {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string str() const;  // "input_ids: int64[128]"
};

// What a read may draw its randomness from (random windows, crops, flips):
// a pure function of (seed, epoch, sample index) makes a resumed,
// re-sharded or differently threaded run read exactly the same.
struct ReadContext {
  uint64_t seed = 0;
  int64_t epoch = 0;   // 0-based
  bool train = false;  // a training read (random windows, augmentation); false: evaluation, deterministic
};

// 64 random bits for sample i under c: mix(mix(mix(seed) ^ epoch) ^ i),
// mix being splitmix64's step (add 0x9E3779B97F4A7C15, then its finalizer).
// Datasets draw from it, so a resumed or sharded run reads the same; it is
// spelled out because tests replay it in Python.
uint64_t sample_random(const ReadContext& c, int64_t i);

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // One sample in words, for messages: "28x28 images with int64 labels".
  virtual std::string describe() const = 0;

  // The fields of a sample. Empty: the dataset uses the one-input,
  // one-target form below (deprecated).
  virtual std::vector<Field> fields() const { return {}; }
  // Writes sample i: out[f] receives field f, fields()[f].numel() elements
  // of its dtype, row-major; out[f] is null where no port takes field f.
  // The loop may call it from several threads at once.
  virtual void read(int64_t i, const ReadContext& c, void* const* out) const;

  // Deprecated since 0.2 (fields() and read() replace them; removed in 0.3):
  // a dataset without fields feeds a step with one input and one target.
  // check throws, naming both sides, unless batches of `batch` samples fit
  // the model's input type x and target type y; write puts sample i into
  // row r of x and y.
  virtual void check(int64_t batch, const TensorType& x, const TensorType& y) const;
  virtual void write(int64_t i, int64_t r, const Tensor& x, const Tensor& y) const;
};

// Train and Test: a source's own split (a file without one keeps its last
// tenth for the test split). All: every sample, for a file named as the
// test set (train --test-data); sources with a fixed split give its test part.
enum class Split { Train, Test, All };

// The datasets the CLI knows, by spec string (docs/data.md):
//   fashion-mnist   the Debian dataset-fashion-mnist IDX files
//   idx:DIR         MNIST-format IDX files in DIR
//   fortunes:T      Debian's fortune cookies as byte windows of length T (data/text.h)
//   text:FILE:T     any file as byte windows of length T
//   autoencode:IMAGES  one of the above, each image its own float32 target
//   friedman1[:SIGMA[:N_TRAIN[:N_TEST]]]  generated regression (data/synthetic.h)
//   npz:FILE        numpy arrays, one field per array (.npz or a single .npy)
//   shards:DIR      the checksummed, memory-mapped shards trainstep.data.write
//                   writes to a folder
//   tokens:FILE:BLOCK[:DTYPE]  a flat token file (nanoGPT's train.bin),
//                   random windows of BLOCK+1 tokens as (x, y)
//   images:DIR:SIZE[:OPTION=VALUE]...  an ImageFolder of JPEG and PNG files,
//                   random resized crops and flips in training
std::unique_ptr<Dataset> open_dataset(const std::string& spec, Split split);

// The spec strings open_dataset accepts, for help texts and errors.
const char* dataset_specs();

}  // namespace ts

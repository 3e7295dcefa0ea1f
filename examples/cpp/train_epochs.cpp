// Trains an exported MNIST-shaped artifact (examples/mnist) for whole epochs
// with ts::train, the loop `trainstep train` runs (shuffling, evaluation on
// the test split, checkpoints), on a Dataset class of this program's own:
//
//   train_epochs ART.tstep DATA_DIR [EPOCHS] [MAX_BATCHES] [SAVE]
//
// DATA_DIR holds the IDX files of MNIST or Fashion-MNIST, as for
// train_mnist. MAX_BATCHES > 0 cuts each epoch short; SAVE is a checkpoint
// written after every epoch.
#include <trainstep/dataset.h>
#include <trainstep/session.h>
#include <trainstep/train.h>

#include <cstdio>
#include <string>
#include <vector>

#include "idx_file.h"

namespace {

// 28x28 greyscale images with class labels, normalised as the examples'
// torchvision Normalize((0.1307,), (0.3081,)).
class Images : public ts::Dataset {
 public:
  Images(const std::string& dir, const std::string& split)
      : pixels_(example::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz", 3)),
        labels_(example::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz", 1)) {}

  int64_t size() const override { return int64_t(labels_.size()); }
  std::string describe() const override { return "28x28 images with int64 labels"; }
  // The loop feeds the model input from field "x" and the target from "y"
  // (a lone input and target take these names; others go by port name).
  std::vector<ts::Field> fields() const override {
    return {{"x", ts::DType::F32, {28, 28}}, {"y", ts::DType::I64, {}}};
  }
  void read(int64_t i, const ts::ReadContext&, void* const* out) const override {
    if (float* x = static_cast<float*>(out[0]))
      for (int64_t k = 0; k < kPixels; ++k) x[k] = (pixels_[i * kPixels + k] / 255.0f - 0.1307f) / 0.3081f;
    if (out[1]) *static_cast<int64_t*>(out[1]) = labels_[i];
  }

 private:
  static constexpr int64_t kPixels = 28 * 28;
  std::vector<unsigned char> pixels_, labels_;
};

// The loop reports through an observer; this one prints each epoch.
struct PrintEpochs : ts::TrainObserver {
  void on_epoch(const ts::EpochReport& r) override {
    std::printf("epoch %lld train_loss %.17g test_loss %.17g test_accuracy %.17g\n",
                (long long)r.epoch, r.train_loss, r.test.loss, r.test.accuracy);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ART.tstep DATA_DIR [EPOCHS] [MAX_BATCHES] [SAVE]\n", argv[0]);
    return 2;
  }
  try {
    ts::SessionOptions opts;
    opts.threads = 1;
    auto session = ts::Session::open(argv[1], opts);
    const Images train(argv[2], "train"), test(argv[2], "t10k");
    ts::TrainOptions o;
    o.epochs = argc > 3 ? std::stoll(argv[3]) : 1;
    o.max_batches = argc > 4 ? std::stoll(argv[4]) : 0;
    if (argc > 5) o.save = argv[5];
    PrintEpochs out;
    const ts::TrainResult r = ts::train(*session, train, test, o, &out);
    std::printf("trained %lld epochs to step %lld\n", (long long)r.epochs_done,
                (long long)session->step());
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

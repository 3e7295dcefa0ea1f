// Trains an exported MNIST-shaped artifact (examples/mnist) from this
// program's own data loop, through trainstep's public API only:
//
//   train_mnist ART.tstep DATA_DIR [STEPS] [CHECKPOINT]
//
// DATA_DIR holds the IDX files of MNIST or Fashion-MNIST
// (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz); Debian's
// dataset-fashion-mnist puts them in /usr/share/datasets/fashion-mnist.
#include <trainstep/session.h>

#include <cstdio>
#include <string>
#include <vector>

#include "idx_file.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ART.tstep DATA_DIR [STEPS] [CHECKPOINT]\n", argv[0]);
    return 2;
  }
  try {
    ts::SessionOptions opts;
    opts.threads = 1;
    auto session = ts::Session::open(argv[1], opts);
    const int steps = argc > 3 ? std::stoi(argv[3]) : 20;
    const std::string dir = argv[2];
    const auto images = example::read_idx(dir + "/train-images-idx3-ubyte.gz", 3);
    const auto labels = example::read_idx(dir + "/train-labels-idx1-ubyte.gz", 1);

    // Caller-owned batch buffers, shaped as the artifact's example batch.
    const std::vector<ts::TensorType> in = session->input_types();
    const ts::TensorType target = session->target_type();
    if (in.size() != 1 || in[0].shape.size() != 4 || target.dtype != ts::DType::I64)
      throw ts::Error(std::string(argv[1]) + ": expected one image input and class labels");
    ts::HostTensor x(in[0].dtype, in[0].shape), y(target.dtype, target.shape);
    const int64_t batch = session->batch_size(), pixels = x.view.numel() / batch;
    const int64_t samples = int64_t(labels.size());

    for (int step = 0; step < steps; ++step) {
      float* xs = x.view.as<float>();
      int64_t* ys = y.view.as<int64_t>();
      for (int64_t i = 0; i < batch; ++i) {  // samples in file order, wrapping
        const int64_t s = (int64_t(step) * batch + i) % samples;
        for (int64_t k = 0; k < pixels; ++k)  // the examples' Normalize((0.1307,), (0.3081,))
          xs[i * pixels + k] = (images[s * pixels + k] / 255.0f - 0.1307f) / 0.3081f;
        ys[i] = labels[s];
      }
      const float loss = session->train_step({x.view}, y.view);
      std::printf("step %d loss %.6f\n", step + 1, loss);
    }
    if (argc > 4) {
      session->save_checkpoint(argv[4]);
      std::printf("saved %s at step %lld\n", argv[4], (long long)session->step());
    }
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

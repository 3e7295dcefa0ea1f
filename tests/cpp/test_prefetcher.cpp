// The prefetcher hands out exactly the batches Batcher::fill gives, in order,
// however the two threads interleave.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "data/idx.h"
#include "data/prefetcher.h"

TEST(Prefetcher, SameBatchesInOrderAsDirectFill) {
  ts::ImageDataset d;
  d.n = 203;
  d.rows = d.cols = 3;
  std::mt19937 rng(1);
  for (int64_t i = 0; i < d.n * 9; ++i) d.images.push_back(uint8_t(rng()));
  for (int64_t i = 0; i < d.n; ++i) d.labels.push_back(uint8_t(rng() % 10));
  d.mean = 0.5f;
  d.std = 0.25f;
  ts::Batcher b(d, 16);
  ts::TensorType xt{ts::DType::F32, {16, 1, 3, 3}}, yt{ts::DType::I64, {16}};
  ts::Prefetcher pf(b, xt, yt);
  ts::HostTensor x(xt.dtype, xt.shape), y(yt.dtype, yt.shape);
  for (int epoch = 0; epoch < 3; ++epoch) {
    b.shuffle(7, epoch);
    pf.start(0, b.padded_batches());
    for (int64_t k = 0; k < b.padded_batches(); ++k) {
      if (k % 3 == epoch) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      pf.next();
      int64_t real = b.fill(k, x.view, y.view);
      ASSERT_EQ(pf.real(), real) << "epoch " << epoch << " batch " << k;
      ASSERT_EQ(0, std::memcmp(pf.x().view.data, x.view.data, x.view.nbytes()));
      ASSERT_EQ(0, std::memcmp(pf.y().view.data, y.view.data, y.view.nbytes()));
    }
  }
}

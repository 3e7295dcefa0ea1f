// The prefetcher hands out exactly the batches Batcher::fill gives, in order,
// however the two threads interleave.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "data/idx.h"
#include "data/text.h"
#include "trainstep/error.h"
#include "data/prefetcher.h"
#include "feed_test_util.h"

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
  const ts::Feed f = ts_test::xy_feed(d, xt, yt);
  ts::Prefetcher pf(b, f);
  ts::HostTensor x(xt.dtype, xt.shape), y(yt.dtype, yt.shape);
  for (int epoch = 0; epoch < 3; ++epoch) {
    b.shuffle(7, epoch);
    pf.start(0, b.padded_batches());
    for (int64_t k = 0; k < b.padded_batches(); ++k) {
      if (k % 3 == epoch) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      pf.next();
      int64_t real = ts_test::fill_xy(b, f, k, x.view, y.view);
      ASSERT_EQ(pf.real(), real) << "epoch " << epoch << " batch " << k;
      ASSERT_EQ(0, std::memcmp(pf.inputs()[0].data, x.view.data, x.view.nbytes()));
      ASSERT_EQ(0, std::memcmp(pf.targets()[0].data, y.view.data, y.view.nbytes()));
    }
  }
}

// A batch whose batch dim is not 0 (sequence-first text, (T, B)) holds the
// batch-major batch Batcher::fill gives with that dim moved: element
// [t, b] of the prefetched input is element [b, t] of the direct fill.
TEST(Prefetcher, MovesTheBatchDimIntoPlace) {
  std::vector<uint8_t> text(2000);
  std::mt19937 rng(2);
  for (auto& c : text) c = uint8_t(rng());
  ts::TextDataset d = ts::make_text_split("random", text, 6, true);
  const int64_t B = 5, T = 6;
  ts::Batcher b(d, B);
  ts::TensorType rows{ts::DType::I64, {B, T}}, seq_first{ts::DType::I64, {T, B}};
  EXPECT_EQ(ts::batch_major(seq_first, 1).shape, rows.shape);
  const ts::Feed f = ts::make_feed(d, {{"input0", false, seq_first, 1}, {"target", true, rows, 0}}, B, {});
  ts::Prefetcher pf(b, f);
  ts::HostTensor x(rows.dtype, rows.shape), y(rows.dtype, rows.shape);
  b.shuffle(3, 0);
  pf.start(0, b.padded_batches());
  for (int64_t k = 0; k < b.padded_batches(); ++k) {
    pf.next();
    ASSERT_EQ(pf.real(), ts_test::fill_xy(b, f, k, x.view, y.view));
    const int64_t* got = pf.inputs()[0].as<int64_t>();
    const int64_t* want = x.view.as<int64_t>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < B; ++r)
        ASSERT_EQ(got[t * B + r], want[r * T + t]) << "batch " << k << " t " << t << " b " << r;
    ASSERT_EQ(0, std::memcmp(pf.targets()[0].data, y.view.data, y.view.nbytes()));
  }
  EXPECT_THROW(ts::batch_major(seq_first, 2), ts::Error);
}

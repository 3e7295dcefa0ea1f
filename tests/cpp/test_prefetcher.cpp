// The prefetcher hands out exactly the batches Batcher::fill gives, in order,
// however the two threads interleave.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "data/idx.h"
#include "data/text.h"
#include "trainstep/error.h"
#include "data/prefetcher.h"
#include "feed_test_util.h"
#include "test_util.h"

using ts_test::error_of;

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

namespace {

// Sample i: 4 floats i, i + 0.25, ...; reading sample `bad` throws. Reads
// sleep now and then, so workers finish out of order.
struct Slowish : ts::Dataset {
  int64_t n = 97, bad = -1;
  int64_t size() const override { return n; }
  std::string describe() const override { return "slowish"; }
  std::vector<ts::Field> fields() const override {
    return {{"x", ts::DType::F32, {4}}, {"y", ts::DType::I64, {}}};
  }
  void read(int64_t i, const ts::ReadContext& c, void* const* out) const override {
    if (i == bad) ts::fail("sample " + std::to_string(i) + " is bad");
    if ((i * 7 + c.epoch) % 11 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    if (out[0])
      for (int k = 0; k < 4; ++k) static_cast<float*>(out[0])[k] = float(i) + 0.25f * k;
    if (out[1]) *static_cast<int64_t*>(out[1]) = i;
  }
};

}  // namespace

// However many threads fill them, the batches come in order and are the
// ones Batcher::fill gives; a mid-epoch restart (a resume) too.
TEST(Prefetcher, ThreadCountNeverChangesTheBatches) {
  Slowish d;
  ts::Batcher b(d, 8);
  ts::TensorType xt{ts::DType::F32, {8, 4}}, yt{ts::DType::I64, {8}};
  const ts::Feed f = ts_test::xy_feed(d, xt, yt);
  ts::HostTensor x(xt.dtype, xt.shape), y(yt.dtype, yt.shape);
  for (int threads : {1, 2, 3, 5}) {
    ts::Prefetcher pf(b, f, threads);
    for (int epoch = 0; epoch < 2; ++epoch) {
      b.shuffle(9, epoch);
      const int64_t first = epoch == 1 ? 4 : 0;
      pf.start(first, b.padded_batches() - first);
      for (int64_t k = first; k < b.padded_batches(); ++k) {
        pf.next();
        ASSERT_EQ(pf.real(), ts_test::fill_xy(b, f, k, x.view, y.view)) << threads << " " << k;
        ASSERT_EQ(0, std::memcmp(pf.inputs()[0].data, x.view.data, x.view.nbytes()));
        ASSERT_EQ(0, std::memcmp(pf.targets()[0].data, y.view.data, y.view.nbytes()));
      }
    }
  }
}

// A read that fails surfaces at its batch, after the batches before it,
// whichever worker met it first; stopping early leaves no thread behind.
TEST(Prefetcher, AFailedReadSurfacesAtItsBatch) {
  Slowish d;
  d.bad = 45;  // batch 5 in sequential order
  ts::Batcher b(d, 8);
  const ts::Feed f = ts_test::xy_feed(d, {ts::DType::F32, {8, 4}}, {ts::DType::I64, {8}});
  for (int threads : {1, 3}) {
    ts::Prefetcher pf(b, f, threads);
    b.sequential();
    pf.start(0, b.padded_batches());
    for (int64_t k = 0; k < 5; ++k) {
      pf.next();
      ASSERT_EQ(pf.targets()[0].as<int64_t>()[0], k * 8);
    }
    EXPECT_EQ(error_of([&] { pf.next(); }), "sample 45 is bad");
    pf.start(0, 2);  // a restart after an error works
    pf.next();
    EXPECT_EQ(pf.targets()[0].as<int64_t>()[7], 7);
  }
  EXPECT_THROW(ts::Prefetcher(b, f, 0), ts::Error);
}

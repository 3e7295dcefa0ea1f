// Generated and derived data sources: friedman1 (a known answer: the noise
// is the best test MSE) and autoencode:IMAGES (images as their own targets).
#include <gtest/gtest.h>

#include <cmath>

#include "data/batcher.h"
#include "data/idx.h"
#include "data/synthetic.h"
#include "feed_test_util.h"
#include "test_util.h"

using ts::DType;
using ts::HostTensor;
using ts_test::error_of;

TEST(Friedman1, NoiseIsWhatTheSpecSays) {
  auto d = ts::open_dataset("friedman1:0.5:20000:300", ts::Split::Train);
  ASSERT_EQ(d->size(), 20000);
  HostTensor x(DType::F32, {20000, 10}), y(DType::F32, {20000, 1});
  const ts::Feed f = ts_test::xy_feed(*d, x.view.type(), y.view.type());
  ts::Batcher b(*d, 20000);
  ASSERT_EQ(ts_test::fill_xy(b, f, 0, x.view, y.view), 20000);
  // Features uniform on [0, 1); residuals y - f(x) have sd 0.5, mean 0.
  double xs = 0, rs = 0, rq = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    const float* xi = x.view.as<float>() + i * 10;
    for (int k = 0; k < 10; ++k) {
      ASSERT_GE(xi[k], 0.f);
      ASSERT_LT(xi[k], 1.f);
      xs += xi[k];
    }
    double r = y.view.as<float>()[i] - ts::friedman1(xi);
    rs += r;
    rq += r * r;
  }
  EXPECT_NEAR(xs / 200000, 0.5, 0.005);
  EXPECT_NEAR(rs / 20000, 0, 0.015);  // 4 standard errors
  EXPECT_NEAR(std::sqrt(rq / 20000), 0.5, 0.01);
  EXPECT_EQ(ts::open_dataset("friedman1:0.5:20000:300", ts::Split::Test)->size(), 300);
}

TEST(Friedman1, SameSpecSameDataSplitsDiffer) {
  auto a = ts::make_friedman1(50, 1.0, 1), b = ts::make_friedman1(50, 1.0, 1);
  auto c = ts::make_friedman1(50, 1.0, 2);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_NE(a.x, c.x);
  // The known function at one point: 10 sin(pi/4) + 20 * 0 + 10 * 0.25 + 5 * 1.
  float p[10] = {0.5f, 0.5f, 0.5f, 0.25f, 1.f};
  EXPECT_NEAR(ts::friedman1(p), 10 * std::sin(M_PI / 4) + 2.5 + 5, 1e-6);
}

TEST(Friedman1, BadSpecsAndShapesAreNamed) {
  EXPECT_EQ(error_of([] { ts::open_dataset("friedman1:x", ts::Split::Train); }),
            "dataset 'friedman1:x': SIGMA 'x' is not a non-negative number");
  EXPECT_EQ(error_of([] { ts::open_dataset("friedman1:1:10.5", ts::Split::Train); }),
            "dataset 'friedman1:1:10.5': N_TRAIN '10.5' is not a positive integer");
  EXPECT_EQ(error_of([] { ts::open_dataset("friedman1:1:2:3:4", ts::Split::Train); }),
            "dataset 'friedman1:1:2:3:4': expected friedman1[:SIGMA[:N_TRAIN[:N_TEST]]]");
  auto d = ts::make_friedman1(8, 1.0, 1);
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, {DType::F32, {4, 10}}, {DType::I64, {4}}); }),
            "target port 'target' (int64[4]) takes int64[] a sample, but the data's field y: "
            "float32[] (" + d.describe() + "): the dtypes differ");
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, {DType::F32, {4, 9}}, {DType::F32, {4}}); }),
            "input port 'input0' (float32[4, 9]) takes float32[9] a sample, but the data's field x: "
            "float32[10] (" + d.describe() + "): the sizes differ");
}

TEST(Autoencode, ImageIsInputAndTarget) {
  ts::ImageDataset img;
  img.n = 3;
  img.rows = 2;
  img.cols = 2;
  img.images = {0, 51, 255, 128, 1, 2, 3, 4, 5, 6, 7, 8};
  img.labels = {0, 1, 2};
  ts::ImageReconstructionDataset d(img);
  ts::Batcher b(d, 2);
  HostTensor x(DType::F32, {2, 1, 2, 2}), y(DType::F32, {2, 4});
  const ts::Feed f = ts_test::xy_feed(d, x.view.type(), y.view.type());
  b.sequential();
  EXPECT_EQ(ts_test::fill_xy(b, f, 0, x.view, y.view), 2);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(x.view.as<float>()[k], static_cast<float>(img.images[k]) / 255.0f);
    EXPECT_EQ(y.view.as<float>()[k], x.view.as<float>()[k]);
  }
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, x.view.type(), {DType::I64, {2}}); }),
            "target port 'target' (int64[2]) takes int64[] a sample, but the data's field y: "
            "float32[2, 2] (2x2 images as their own float32 targets): the dtypes differ");
  EXPECT_EQ(error_of([] { ts::open_dataset("autoencode:cifar", ts::Split::Train); }),
            "dataset 'autoencode:cifar': autoencode takes an image dataset (fashion-mnist | idx:DIR)");
}

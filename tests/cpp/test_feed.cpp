// Ports to fields (data/feed.h): which field feeds which port, what fits,
// the errors, and the deprecated one-input, one-target datasets through
// their adapter.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/feed.h"
#include "test_util.h"

using ts::DType;
using ts::Field;
using ts_test::error_of;

namespace {

// n samples; field f of sample i holds 100 * f + i in every element.
struct Fields : ts::Dataset {
  std::vector<Field> fs;
  int64_t n = 5;
  int64_t size() const override { return n; }
  std::string describe() const override { return "test fields"; }
  std::vector<Field> fields() const override { return fs; }
  void read(int64_t i, const ts::ReadContext&, void* const* out) const override {
    for (size_t f = 0; f < fs.size(); ++f) {
      if (!out[f]) continue;
      for (int64_t k = 0; k < fs[f].numel(); ++k) {
        const double v = 100.0 * f + i;
        if (fs[f].dtype == DType::I64) static_cast<int64_t*>(out[f])[k] = static_cast<int64_t>(v);
        else static_cast<float*>(out[f])[k] = static_cast<float>(v);
      }
    }
  }
};

ts::PortSpec in(std::string name, ts::Shape s, DType d = DType::F32) {
  return {std::move(name), false, {d, std::move(s)}, 0};
}
ts::PortSpec tgt(std::string name, ts::Shape s, DType d = DType::I64) {
  return {std::move(name), true, {d, std::move(s)}, 0};
}

}  // namespace

TEST(Feed, ByNameThenPathTailThenUsualNames) {
  Fields d;
  d.fs = {{"label", DType::I64, {}}, {"mask", DType::I64, {3}}, {"x", DType::F32, {2, 2}},
          {"input_ids", DType::I64, {3}}};
  // A lone target takes "label"; "batch/input_ids" its tail; "mask" its name.
  auto f = ts::make_feed(d, {in("batch/input_ids", {2, 3}, DType::I64), in("mask", {2, 3}, DType::I64),
                             tgt("target", {2})}, 2, {});
  EXPECT_EQ(f.field, (std::vector<size_t>{3, 1, 0}));
  // A lone input takes "x", whatever its shape, if the sizes agree.
  f = ts::make_feed(d, {in("input0", {2, 1, 4}), tgt("target", {2})}, 2, {});
  EXPECT_EQ(f.field, (std::vector<size_t>{2, 0}));
  // An explicit map wins over a field of the port's own name.
  f = ts::make_feed(d, {in("mask", {2, 3}, DType::I64), tgt("target", {2})}, 2,
                    {{"mask", "input_ids"}});
  EXPECT_EQ(f.field, (std::vector<size_t>{3, 0}));
}

TEST(Feed, ErrorsNameThePortTheFieldAndBothTypes) {
  Fields d;
  d.fs = {{"ids", DType::I64, {3}}, {"y", DType::I64, {}}};
  EXPECT_EQ(error_of([&] {
              ts::make_feed(d, {in("ids", {2, 3}, DType::I64), in("mask", {2, 3}, DType::I64),
                                tgt("target", {2})}, 2, {});
            }),
            "input port 'mask' (int64[2, 3]) has no field of that name in the data (test fields); "
            "its fields: ids: int64[3], y: int64[]. Name one with --map mask=FIELD");
  EXPECT_EQ(error_of([&] { ts::make_feed(d, {in("ids", {2, 4}, DType::I64), tgt("t", {2})}, 2, {}); }),
            "input port 'ids' (int64[2, 4]) takes int64[4] a sample, but the data's field ids: "
            "int64[3] (test fields): the sizes differ");
  EXPECT_EQ(error_of([&] { ts::make_feed(d, {in("ids", {2, 3}), tgt("t", {2})}, 2, {}); }),
            "input port 'ids' (float32[2, 3]) takes float32[3] a sample, but the data's field ids: "
            "int64[3] (test fields): the dtypes differ");
  EXPECT_EQ(error_of([&] {
              ts::make_feed(d, {in("ids", {2, 3}, DType::I64), tgt("t", {2})}, 2, {{"t", "label"}});
            }),
            "target port 't' (int64[2]) (--map t=label): the data (test fields) has no field "
            "'label'; its fields: ids: int64[3], y: int64[]");
  EXPECT_EQ(error_of([&] {
              ts::make_feed(d, {in("ids", {2, 3}, DType::I64), tgt("t", {2})}, 2, {{"ids2", "ids"}});
            }),
            "--map ids2=ids: the step has no port 'ids2' (its ports: ids, t)");
}

TEST(Feed, BatchesFillEveryPortAndTwoPortsMayShareAField) {
  Fields d;
  d.fs = {{"a", DType::F32, {2}}, {"b", DType::I64, {}}};
  // Port "a2" reads field a too (an autoencoder's input and target).
  auto f = ts::make_feed(d, {in("a", {2, 2}), in("a2", {2, 2}), tgt("b", {2})}, 2, {{"a2", "a"}});
  ts::Batcher b(d, 2);
  ts::HostTensor a(DType::F32, {2, 2}), a2(DType::F32, {2, 2}), lab(DType::I64, {2});
  EXPECT_EQ(b.fill(2, f, {a.view, a2.view, lab.view}), 1);  // sample 4, then padding
  EXPECT_EQ(std::vector<float>(a.view.as<float>(), a.view.as<float>() + 4),
            (std::vector<float>{4, 4, 0, 0}));
  EXPECT_EQ(0, std::memcmp(a.view.data, a2.view.data, a.view.nbytes()));
  EXPECT_EQ(lab.view.as<int64_t>()[0], 104);
  EXPECT_EQ(lab.view.as<int64_t>()[1], 0);
}

namespace {

// The deprecated form: check() and write() a row of whole-batch tensors.
struct OldStyle : ts::Dataset {
  int64_t size() const override { return 5; }
  std::string describe() const override { return "old style"; }
  void check(int64_t batch, const ts::TensorType& x, const ts::TensorType& y) const override {
    if (x.numel() != batch * 3 || y.numel() != batch) ts::fail("old style does not fit " + x.str());
  }
  void write(int64_t i, int64_t r, const ts::Tensor& x, const ts::Tensor& y) const override {
    for (int k = 0; k < 3; ++k) x.as<float>()[r * 3 + k] = float(i * 10 + k);
    y.as<int64_t>()[r] = i;
  }
};

}  // namespace

TEST(Feed, DeprecatedDatasetsFeedOneInputAndOneTarget) {
  OldStyle d;
  auto f = ts::make_feed(d, {in("input0", {2, 3}), tgt("target", {2})}, 2, {});
  ts::Batcher b(d, 2);
  b.shuffle(4, 1);
  ts::Batcher plain(d, 2);
  plain.shuffle(4, 1);
  ts::HostTensor x(DType::F32, {2, 3}), y(DType::I64, {2});
  ts::HostTensor wx(DType::F32, {2, 3}), wy(DType::I64, {2});
  for (int64_t k = 0; k < b.padded_batches(); ++k) {
    const int64_t real = b.fill(k, f, {x.view, y.view});
    // What write() puts in row r is what the adapter gave: same samples, same order.
    for (int64_t r = 0; r < real; ++r) {
      const int64_t i = y.view.as<int64_t>()[r];
      d.write(i, r, wx.view, wy.view);
      EXPECT_EQ(0, std::memcmp(x.view.as<float>() + r * 3, wx.view.as<float>() + r * 3, 12));
    }
  }
  EXPECT_EQ(error_of([&] { ts::make_feed(d, {in("input0", {2, 4}), tgt("target", {2})}, 2, {}); }),
            "old style does not fit float32[2, 4]");
  EXPECT_EQ(error_of([&] {
              ts::make_feed(d, {in("a", {2, 3}), in("b", {2, 3}), tgt("target", {2})}, 2, {});
            }),
            "the step takes 2 input and 1 target tensors (a, b, target), and the dataset (old "
            "style) feeds one of each; give it fields() (trainstep/dataset.h)");
}

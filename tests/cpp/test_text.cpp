// The text dataset: byte windows, the train/test cut, batches through the
// Batcher, the fortunes corpus reader and the spec strings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/text.h"
#include "io/atomic_file.h"
#include "feed_test_util.h"
#include "test_util.h"
#include "trainstep/tensor.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

void write(const std::string& path, const std::string& s) { ts::write_file_atomic(path, s.data(), s.size()); }

}  // namespace

TEST(Text, WindowsAndSplit) {
  // 100 bytes: the last 10 are the test split; windows of T+1 start every T.
  std::string s;
  for (int i = 0; i < 100; ++i) s.push_back(static_cast<char>('a' + i % 26));
  auto all = bytes_of(s);
  auto train = ts::make_text_split("t", all, 8, true);
  auto test = ts::make_text_split("t", all, 4, false);
  EXPECT_EQ(train.bytes.size(), 90u);
  EXPECT_EQ(train.size(), (90 - 1) / 8);  // 11 windows
  EXPECT_EQ(test.bytes.size(), 10u);
  EXPECT_EQ(test.size(), 2);
  EXPECT_EQ(test.bytes[0], all[90]);

  int64_t x[8], y[8];
  void* out[2] = {x, y};
  train.read(3, {}, out);  // window 3: bytes 24..32
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(x[t], all[24 + t]);
    EXPECT_EQ(y[t], all[25 + t]);
  }
}

TEST(Text, BatchesCoverEveryWindowOncePerEpoch) {
  std::vector<uint8_t> all(1000);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i * 7 % 256);
  auto d = ts::make_text_split("t", all, 10, true);  // 900 bytes -> 89 windows
  ts::Batcher b(d, 8);
  b.shuffle(3, 0);
  ts::HostTensor x(ts::DType::I64, {8, 10}), y(ts::DType::I64, {8, 10});
  const ts::Feed f = ts_test::xy_feed(d, x.view.type(), y.view.type());
  std::vector<int> seen(d.size(), 0);
  for (int64_t k = 0; k < b.padded_batches(); ++k) {
    const int64_t real = ts_test::fill_xy(b, f, k, x.view, y.view);
    for (int64_t r = 0; r < real; ++r) {
      const int64_t first = x.view.as<int64_t>()[r * 10];
      // Each row is some window: find it by its first two bytes' position.
      int64_t w = -1;
      for (int64_t i = 0; i < d.size(); ++i)
        if (all[i * 10] == first && all[i * 10 + 1] == x.view.as<int64_t>()[r * 10 + 1] &&
            all[i * 10 + 10] == y.view.as<int64_t>()[r * 10 + 9])
          w = i;
      ASSERT_GE(w, 0);
      ++seen[w];
    }
  }
  for (int c : seen) EXPECT_EQ(c, 1);
}

TEST(Text, ModelShapeMismatchIsNamed) {
  auto d = ts::make_text_split("fortunes", std::vector<uint8_t>(500, 'x'), 16, true);
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, {ts::DType::I64, {4, 32}}, {ts::DType::I64, {4, 32}}); }),
            "input port 'input0' (int64[4, 32]) takes int64[32] a sample, but the data's field x: "
            "int64[16] (windows of 16 bytes of fortunes with int64 next-byte targets): the sizes "
            "differ");
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, {ts::DType::I64, {4, 16}}, {ts::DType::F32, {4, 16}}); }),
            "target port 'target' (float32[4, 16]) takes float32[16] a sample, but the data's field "
            "y: int64[16] (windows of 16 bytes of fortunes with int64 next-byte targets): the dtypes "
            "differ");
  EXPECT_EQ(error_of([&] { ts_test::xy_feed(d, {ts::DType::I64, {4, 16}}, {ts::DType::I64, {4, 16}}); }), "<no error>");
}

TEST(Text, TooShortAndBadSpecs) {
  EXPECT_EQ(error_of([] { ts::make_text_split("tiny", std::vector<uint8_t>(20, 'x'), 8, false); }),
            "tiny: the test split has 2 bytes, fewer than one window of 9");
  EXPECT_EQ(error_of([] { ts::open_dataset("fortunes", ts::Split::Train); }),
            "dataset 'fortunes' needs a window length: fortunes:T");
  EXPECT_EQ(error_of([] { ts::open_dataset("fortunes:x64", ts::Split::Train); }),
            "dataset 'fortunes:x64': 'x64' is not a window length (a positive integer: the model's "
            "sequence length)");
  EXPECT_EQ(error_of([] { ts::open_dataset("text:/nonexistent/file.txt:8", ts::Split::Train); }),
            "/nonexistent/file.txt: No such file or directory");
  EXPECT_EQ(error_of([] { ts::open_dataset("text:8", ts::Split::Train); }),
            "dataset 'text:8' needs a window length: text:FILE:T");
}

TEST(Text, TextFileSpec) {
  const std::string dir = make_temp_dir();
  std::string s(1000, 'a');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + i % 7);
  write(dir + "/a:b.txt", s);  // a ':' in the path: T is after the last one
  auto tr = ts::open_dataset("text:" + dir + "/a:b.txt:16", ts::Split::Train);
  auto te = ts::open_dataset("text:" + dir + "/a:b.txt:16", ts::Split::Test);
  EXPECT_EQ(tr->size(), (900 - 1) / 16);
  EXPECT_EQ(te->size(), (100 - 1) / 16);
}

TEST(Text, FortunesReaderSkipsIndexesAndLinks) {
  const std::string dir = make_temp_dir();
  write(dir + "/b", "second\n%\n");
  write(dir + "/a", "first\n%\n");
  write(dir + "/a.dat", "binary index");
  ASSERT_EQ(::symlink("a", (dir + "/a.u8").c_str()), 0);
  auto all = ts::read_fortunes(dir);
  EXPECT_EQ(std::string(all.begin(), all.end()), "first\n%\nsecond\n%\n");
  EXPECT_NE(error_of([] { ts::read_fortunes("/nonexistent"); }).find("apt-get install fortunes"),
            std::string::npos);
}

#include <gtest/gtest.h>

#include "feed_test_util.h"
#include "test_util.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include <functional>
#include <string>
#include <vector>

#include "trainstep/error.h"
#include "data/batcher.h"
#include "data/idx.h"
#include "io/atomic_file.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

namespace {

// IDX bytes for a ubyte array with the given dims; element i is i % 251.
std::string idx_bytes(const std::vector<uint32_t>& dims, size_t drop_tail = 0) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((d >> sh) & 0xff));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 251));
  return s.substr(0, s.size() - drop_tail);
}

void write_plain(const std::string& path, const std::string& bytes) {
  ts::write_file_atomic(path, bytes.data(), bytes.size());
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string idx_error(const std::string& bytes) {
  std::string p = make_temp_dir() + "/x.idx";
  write_plain(p, bytes);
  std::string msg = error_of([&] { ts::read_idx(p); });
  EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
  return msg;
}

}  // namespace

TEST(Idx, ReadPlainAndGzip) {
  std::string dir = make_temp_dir();
  std::string bytes = idx_bytes({3, 4, 5});
  write_plain(dir + "/a.idx", bytes);
  write_gz(dir + "/a.idx.gz", bytes);
  for (const char* name : {"/a.idx", "/a.idx.gz"}) {
    ts::IdxArray a = ts::read_idx(dir + name);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 4, 5})) << name;
    ASSERT_EQ(a.data.size(), 60u) << name;
    EXPECT_EQ(a.data[59], 59) << name;
  }
}

TEST(Idx, EmptyArray) {
  std::string dir = make_temp_dir();
  write_plain(dir + "/e.idx", idx_bytes({0, 28, 28}));
  ts::IdxArray a = ts::read_idx(dir + "/e.idx");
  EXPECT_EQ(a.dims, (std::vector<int64_t>{0, 28, 28}));
  EXPECT_TRUE(a.data.empty());
}

TEST(Idx, MissingFile) {
  EXPECT_EQ(error_of([] { ts::read_idx("/nonexistent/x.idx"); }), "/nonexistent/x.idx: no such file");
}

TEST(Idx, BadMagic) { EXPECT_NE(idx_error("GIF89a....").find("not an IDX file (bad magic 0x47494638)"), std::string::npos); }

TEST(Idx, TooShort) { EXPECT_NE(idx_error(std::string("\0\0", 2)).find("not an IDX file"), std::string::npos); }

TEST(Idx, UnsupportedType) {
  std::string b = idx_bytes({2});
  b[2] = 0x0d;
  EXPECT_NE(idx_error(b).find("unsupported IDX element type 0x0d"), std::string::npos);
}

TEST(Idx, BadRank) {
  EXPECT_NE(idx_error(std::string("\0\0\x08\0", 4)).find("unsupported IDX rank 0"), std::string::npos);
  EXPECT_NE(idx_error(idx_bytes({1, 1, 1, 1, 1})).find("unsupported IDX rank 5"), std::string::npos);
}

TEST(Idx, TruncatedDims) {
  EXPECT_NE(idx_error(idx_bytes({2, 2}).substr(0, 9)).find("truncated: header ends inside the dimensions"),
            std::string::npos);
}

TEST(Idx, TruncatedData) {
  EXPECT_NE(idx_error(idx_bytes({10, 10}, 7)).find("truncated: header declares 100 bytes of data, file has 93"),
            std::string::npos);
}

TEST(Idx, TrailingData) {
  EXPECT_NE(idx_error(idx_bytes({4}) + "zz").find("trailing bytes"), std::string::npos);
}

TEST(Idx, HugeDeclaredSizeIsRejectedWithoutAllocating) {
  EXPECT_NE(idx_error(std::string("\0\0\x08\x03\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\x01", 16))
                .find("more than 4 GiB"),
            std::string::npos);
}

TEST(Idx, LyingHeaderInSmallGzip) {
  // Declares ~1 GiB but holds 10 bytes: must fail as truncated, quickly.
  std::string dir = make_temp_dir();
  std::string b = idx_bytes({10});
  b[4] = 0x40;  // first dim becomes 0x4000000a
  write_gz(dir + "/l.gz", b);
  std::string msg = error_of([&] { ts::read_idx(dir + "/l.gz"); });
  EXPECT_NE(msg.find("truncated: header declares 1073741834 bytes of data, file has 10"), std::string::npos) << msg;
}

TEST(Idx, TruncatedGzip) {
  std::string dir = make_temp_dir();
  write_gz(dir + "/t.gz", idx_bytes({200, 50}));
  std::string gz = ts::read_file(dir + "/t.gz");
  // Cut the stream in the middle of the deflate data, and also cut only the
  // 8-byte CRC/length trailer: both must be reported as truncated.
  for (size_t keep : {gz.size() / 2, gz.size() - 4}) {
    write_plain(dir + "/t2.gz", gz.substr(0, keep));
    std::string msg = error_of([&] { ts::read_idx(dir + "/t2.gz"); });
    EXPECT_NE(msg.find(dir + "/t2.gz: truncated"), std::string::npos) << keep << ": " << msg;
  }
}

TEST(Idx, CorruptGzip) {
  std::string dir = make_temp_dir();
  write_gz(dir + "/c.gz", idx_bytes({100}));
  std::string gz = ts::read_file(dir + "/c.gz");
  gz[gz.size() - 6] ^= 0x5a;  // inside the CRC32 trailer
  write_plain(dir + "/c2.gz", gz);
  std::string msg = error_of([&] { ts::read_idx(dir + "/c2.gz"); });
  EXPECT_NE(msg.find("corrupt gzip data"), std::string::npos) << msg;
}

TEST(Idx, LoadSplit) {
  std::string dir = make_temp_dir();
  write_gz(dir + "/train-images-idx3-ubyte.gz", idx_bytes({5, 2, 3}));
  write_plain(dir + "/train-labels-idx1-ubyte", idx_bytes({5}));
  ts::ImageDataset ds = ts::load_idx_split(dir, true);
  EXPECT_EQ(ds.n, 5);
  EXPECT_EQ(ds.rows, 2);
  EXPECT_EQ(ds.cols, 3);
  EXPECT_EQ(ds.images.size(), 30u);
  EXPECT_EQ(ds.labels.size(), 5u);

  std::string msg = error_of([&] { ts::load_idx_split(dir, false); });
  EXPECT_EQ(msg, dir + ": missing t10k-images-idx3-ubyte (or t10k-images-idx3-ubyte.gz)");

  write_plain(dir + "/t10k-images-idx3-ubyte", idx_bytes({4, 2, 3}));
  write_plain(dir + "/t10k-labels-idx1-ubyte", idx_bytes({3}));
  msg = error_of([&] { ts::load_idx_split(dir, false); });
  EXPECT_NE(msg.find("4 images but 3 labels"), std::string::npos) << msg;

  write_plain(dir + "/t10k-labels-idx1-ubyte", idx_bytes({4, 1}));
  msg = error_of([&] { ts::load_idx_split(dir, false); });
  EXPECT_NE(msg.find("labels must have rank 1, got 2"), std::string::npos) << msg;

  write_plain(dir + "/t10k-images-idx3-ubyte", idx_bytes({4, 6}));
  msg = error_of([&] { ts::load_idx_split(dir, false); });
  EXPECT_NE(msg.find("images must have rank 3, got 2"), std::string::npos) << msg;
}

// Manual check against the real data when it is installed on this machine.
TEST(Idx, FashionMnistIfPresent) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  struct stat st;
  if (stat((dir + "/t10k-labels-idx1-ubyte.gz").c_str(), &st) != 0) GTEST_SKIP() << "no " << dir;
  ts::ImageDataset ds = ts::load_idx_split(dir, false);
  EXPECT_EQ(ds.n, 10000);
  EXPECT_EQ(ds.rows, 28);
  EXPECT_EQ(ds.cols, 28);
  for (uint8_t l : ds.labels) ASSERT_LT(l, 10);
}

TEST(Dataset, UnknownSpecNamesTheChoices) {
  std::string msg = error_of([] { ts::open_dataset("cifar", ts::Split::Train); });
  EXPECT_EQ(msg, "unknown dataset 'cifar' (expected fashion-mnist | idx:DIR | autoencode:IMAGES | "
                 "friedman1[:SIGMA[:N_TRAIN[:N_TEST]]] | fortunes:T | text:FILE:T | npz:FILE | "
                 "shards:DIR | tokens:FILE:BLOCK[:DTYPE] | images:DIR:SIZE[:OPTION=VALUE]...)");
}

TEST(Dataset, BatchThatDoesNotFitTheModelIsNamed) {
  ts::ImageDataset d;
  d.n = 4;
  d.rows = d.cols = 2;
  d.images.assign(16, 0);
  d.labels.assign(4, 0);
  std::string msg = error_of([&] {
    ts_test::xy_feed(d, {ts::DType::F32, {2, 1, 3, 3}}, {ts::DType::I64, {2}});
  });
  EXPECT_EQ(msg, "input port 'input0' (float32[2, 1, 3, 3]) takes float32[1, 3, 3] a sample, but "
                 "the data's field x: float32[2, 2] (2x2 images with int64 labels): the sizes differ");
}

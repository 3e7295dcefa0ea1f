// The token file dataset (data/tokens.h): the spec, the file checks, the
// splits, evaluation windows in order and training windows at
// sample_random(ctx, i) % (n - BLOCK), replayed here from the formula.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "data/tokens.h"
#include "test_util.h"
#include "trainstep/dataset.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

namespace {

// Little-endian tokens of sizeof(T) bytes each, as numpy's tofile.
template <class T>
std::string write_tokens(const std::string& path, const std::vector<T>& toks) {
  std::ofstream f(path, std::ios::binary);
  for (T v : toks)
    for (size_t b = 0; b < sizeof(T); ++b) f.put(static_cast<char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xFF));
  EXPECT_TRUE(f.good());
  return path;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// Token k is k (fits uint16 for n <= 65536), so a window's start is x[0].
std::vector<uint16_t> iota16(int n) {
  std::vector<uint16_t> v(n);
  for (int k = 0; k < n; ++k) v[k] = static_cast<uint16_t>(k);
  return v;
}

// dataset.h's formula, independently: mix(mix(mix(seed) ^ epoch) ^ i),
// mix = splitmix64's step.
uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t replay_random(uint64_t seed, int64_t epoch, int64_t i) {
  return splitmix(splitmix(splitmix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(i));
}

struct Sample {
  std::vector<int64_t> x, y;
};

Sample read(const ts::Dataset& d, int64_t i, const ts::ReadContext& c) {
  const int64_t block = d.fields()[0].numel();
  Sample s{std::vector<int64_t>(block, -7), std::vector<int64_t>(block, -7)};
  void* out[2] = {s.x.data(), s.y.data()};
  d.read(i, c, out);
  return s;
}

ts::ReadContext train_ctx(uint64_t seed, int64_t epoch) {
  ts::ReadContext c;
  c.seed = seed;
  c.epoch = epoch;
  c.train = true;
  return c;
}

}  // namespace

TEST(Tokens, SpecFileWithColonsAndDefaultDtype) {
  const std::string dir = make_temp_dir("ts_tokens_");
  const std::string path = write_tokens(dir + "/a:b:64.bin", iota16(200));
  for (const std::string& spec : {"tokens:" + path + ":8", "tokens:" + path + ":8:uint16"}) {
    auto d = ts::open_tokens(spec, ts::Split::All);
    EXPECT_EQ(d->size(), 199 / 8) << spec;
    EXPECT_EQ(d->fields()[0].numel(), 8) << spec;
    auto s = read(*d, 2, ts::ReadContext{});
    for (int t = 0; t < 8; ++t) EXPECT_EQ(s.x[t], 16 + t) << spec;
    EXPECT_NE(d->describe().find("uint16"), std::string::npos) << d->describe();
    EXPECT_NE(d->describe().find(path), std::string::npos) << d->describe();
  }
  // A FILE whose last part looks like a BLOCK: the rightmost number is BLOCK.
  const std::string p2 = write_tokens(dir + "/c:5", iota16(50));
  EXPECT_EQ(ts::open_tokens("tokens:" + p2 + ":4", ts::Split::All)->size(), 49 / 4);
}

TEST(Tokens, Uint32) {
  const std::string dir = make_temp_dir("ts_tokens_");
  std::vector<uint32_t> toks(40);
  for (int k = 0; k < 40; ++k) toks[k] = 100000u + 70000u * k;
  toks[5] = 0xFFFFFFFFu;  // unsigned: 4294967295, not -1
  const std::string path = write_tokens(dir + "/t.bin", toks);
  auto d = ts::open_tokens("tokens:" + path + ":4:uint32", ts::Split::All);
  EXPECT_EQ(d->size(), 39 / 4);
  auto s = read(*d, 1, ts::ReadContext{});  // tokens 4..8
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(s.x[t], static_cast<int64_t>(toks[4 + t]));
    EXPECT_EQ(s.y[t], static_cast<int64_t>(toks[5 + t]));
  }
  EXPECT_EQ(s.x[1], int64_t(4294967295));
  EXPECT_NE(d->describe().find("uint32"), std::string::npos);
  // The same bytes as uint16: twice the tokens.
  EXPECT_EQ(ts::open_tokens("tokens:" + path + ":4", ts::Split::All)->size(), 79 / 4);
}

TEST(Tokens, BadSpecs) {
  const std::string dir = make_temp_dir("ts_tokens_");
  const std::string f = write_tokens(dir + "/t.bin", iota16(100));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tokens:" + f + ":abc", "BLOCK 'abc'"},
      {"tokens:" + f + ":0", "BLOCK '0'"},
      {"tokens:" + f + ":-3", "BLOCK '-3'"},
      {"tokens:" + f + ":8x", "BLOCK '8x'"},
      {"tokens:" + f + ":", "BLOCK ''"},
      {"tokens:" + f + ":8:int8", "DTYPE 'int8'"},
      {"tokens:" + f + ":8:uint64", "DTYPE 'uint64'"},
      {"tokens:" + f + ":uint32", "BLOCK"},
      {"tokens:" + f, "no BLOCK"},
      {"tokens::8", "no FILE"},
      {"tokens:uint16", "no BLOCK"},
      {"text:" + f + ":8", "tokens:"},
  };
  for (const auto& [spec, what] : cases) {
    const std::string e = error_of([&] { ts::open_tokens(spec, ts::Split::Train); });
    EXPECT_NE(e.find(spec), std::string::npos) << spec << ": " << e;
    EXPECT_NE(e.find(what), std::string::npos) << spec << ": " << e;
    EXPECT_NE(e.find("tokens:FILE:BLOCK[:DTYPE]"), std::string::npos) << spec << ": " << e;
  }
}

TEST(Tokens, FileErrors) {
  const std::string dir = make_temp_dir("ts_tokens_");
  write_raw(dir + "/odd.bin", std::string(7, 'a'));
  std::string e = error_of([&] { ts::open_tokens("tokens:" + dir + "/odd.bin:2", ts::Split::All); });
  EXPECT_NE(e.find(dir + "/odd.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("7 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("uint16"), std::string::npos) << e;

  write_raw(dir + "/six.bin", std::string(6, 'a'));  // 3 uint16, 1.5 uint32
  e = error_of([&] { ts::open_tokens("tokens:" + dir + "/six.bin:1:uint32", ts::Split::All); });
  EXPECT_NE(e.find("6 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("uint32"), std::string::npos) << e;

  write_raw(dir + "/empty.bin", "");
  e = error_of([&] { ts::open_tokens("tokens:" + dir + "/empty.bin:2", ts::Split::All); });
  EXPECT_NE(e.find("empty"), std::string::npos) << e;

  e = error_of([&] { ts::open_tokens("tokens:" + dir + "/missing.bin:2", ts::Split::All); });
  EXPECT_NE(e.find("missing.bin"), std::string::npos) << e;

  e = error_of([&] { ts::open_tokens("tokens:" + dir + ":2", ts::Split::All); });
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
}

TEST(Tokens, SplitsAndSize) {
  const std::string dir = make_temp_dir("ts_tokens_");
  const std::string spec = "tokens:" + write_tokens(dir + "/t.bin", iota16(1000)) + ":8";
  auto train = ts::open_tokens(spec, ts::Split::Train);  // [0, 900)
  auto test = ts::open_tokens(spec, ts::Split::Test);    // [900, 1000)
  auto all = ts::open_tokens(spec, ts::Split::All);
  EXPECT_EQ(train->size(), 899 / 8);
  EXPECT_EQ(test->size(), 99 / 8);
  EXPECT_EQ(all->size(), 999 / 8);
  EXPECT_EQ(read(*test, 0, ts::ReadContext{}).x[0], 900);
  EXPECT_EQ(read(*train, 0, ts::ReadContext{}).x[0], 0);
  EXPECT_NE(train->describe().find("900 tokens"), std::string::npos) << train->describe();
  EXPECT_NE(train->describe().find("random"), std::string::npos) << train->describe();
  // The last eval window of each split stays inside it.
  const auto last = read(*test, test->size() - 1, ts::ReadContext{});
  EXPECT_EQ(last.y[7], 900 + 12 * 8);
  EXPECT_LT(last.y[7], 1000);

  // 12 tokens: cut = 12 - 12 / 10 = 11, so the test split has 1 token.
  const std::string small = "tokens:" + write_tokens(dir + "/s.bin", iota16(12)) + ":8";
  EXPECT_EQ(ts::open_tokens(small, ts::Split::Train)->size(), 10 / 8);
  const std::string e = error_of([&] { ts::open_tokens(small, ts::Split::Test); });
  EXPECT_NE(e.find(dir + "/s.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("test split has 1 tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("BLOCK 8"), std::string::npos) << e;
  // Exactly BLOCK tokens: no window of BLOCK+1.
  const std::string e2 = error_of([&] { ts::open_tokens(small.substr(0, small.size() - 1) + "12", ts::Split::All); });
  EXPECT_NE(e2.find("12 tokens"), std::string::npos) << e2;
  EXPECT_EQ(ts::open_tokens(small.substr(0, small.size() - 1) + "11", ts::Split::All)->size(), 1);
}

TEST(Tokens, EvalWindowsSequentialAndShifted) {
  const std::string dir = make_temp_dir("ts_tokens_");
  std::vector<uint16_t> toks(500);
  for (int k = 0; k < 500; ++k) toks[k] = static_cast<uint16_t>((k * 7919 + 13) % 65536);
  auto d = ts::open_tokens("tokens:" + write_tokens(dir + "/t.bin", toks) + ":16", ts::Split::All);
  ASSERT_EQ(d->size(), 499 / 16);
  for (int64_t i = 0; i < d->size(); ++i) {
    // Evaluation ignores seed and epoch.
    ts::ReadContext c;
    c.seed = 99;
    c.epoch = i;
    const auto s = read(*d, i, c);
    for (int t = 0; t < 16; ++t) {
      ASSERT_EQ(s.x[t], toks[i * 16 + t]) << i << " " << t;
      ASSERT_EQ(s.y[t], toks[i * 16 + t + 1]) << i << " " << t;
    }
  }
  EXPECT_NE(error_of([&] { read(*d, d->size(), ts::ReadContext{}); }), "<no error>");
  EXPECT_NE(error_of([&] { read(*d, -1, ts::ReadContext{}); }), "<no error>");
}

TEST(Tokens, TrainWindowsRandomDeterministic) {
  const std::string dir = make_temp_dir("ts_tokens_");
  const int n = 2000, block = 8;  // train split: 1800 tokens
  const std::string spec = "tokens:" + write_tokens(dir + "/t.bin", iota16(n)) + ":8";
  auto d = ts::open_tokens(spec, ts::Split::Train);
  auto d2 = ts::open_tokens(spec, ts::Split::Train);
  const int64_t n_split = 1800;
  ASSERT_EQ(d->size(), (n_split - 1) / block);

  int differ_epoch = 0, differ_seed = 0, not_aligned = 0;
  for (int64_t i = 0; i < d->size(); ++i) {
    const auto a = read(*d, i, train_ctx(42, 3));
    const auto b = read(*d2, i, train_ctx(42, 3));
    EXPECT_EQ(a.x, b.x);
    EXPECT_EQ(a.y, b.y);
    const int64_t want = static_cast<int64_t>(replay_random(42, 3, i) % uint64_t(n_split - block));
    ASSERT_EQ(a.x[0], want) << i;
    ASSERT_GE(a.x[0], 0);
    ASSERT_LE(a.x[0] + block, n_split - 1);  // y's last token inside the split
    for (int t = 0; t < block; ++t) {
      ASSERT_EQ(a.x[t], want + t);
      ASSERT_EQ(a.y[t], want + t + 1);
    }
    not_aligned += a.x[0] % block != 0;
    differ_epoch += read(*d, i, train_ctx(42, 4)).x[0] != a.x[0];
    differ_seed += read(*d, i, train_ctx(43, 3)).x[0] != a.x[0];
  }
  EXPECT_GT(differ_epoch, d->size() * 9 / 10);
  EXPECT_GT(differ_seed, d->size() * 9 / 10);
  EXPECT_GT(not_aligned, 0);

  // The test split draws from its own range [1800, 2000).
  auto t = ts::open_tokens(spec, ts::Split::Test);
  for (int64_t i = 0; i < t->size(); ++i) {
    const auto s = read(*t, i, train_ctx(7, 0));
    EXPECT_EQ(s.x[0], 1800 + static_cast<int64_t>(replay_random(7, 0, i) % uint64_t(200 - block)));
    EXPECT_LT(s.y[block - 1], n);
  }
}

TEST(Tokens, FieldsAndNullOutputs) {
  const std::string dir = make_temp_dir("ts_tokens_");
  auto d = ts::open_tokens("tokens:" + write_tokens(dir + "/t.bin", iota16(300)) + ":32", ts::Split::All);
  const auto f = d->fields();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "x");
  EXPECT_EQ(f[1].name, "y");
  EXPECT_EQ(f[0].dtype, ts::DType::I64);
  EXPECT_EQ(f[1].dtype, ts::DType::I64);
  EXPECT_EQ(f[0].shape, ts::Shape{32});
  EXPECT_EQ(f[1].shape, ts::Shape{32});

  std::vector<int64_t> x(32, -1), y(32, -1);
  void* only_x[2] = {x.data(), nullptr};
  d->read(3, ts::ReadContext{}, only_x);
  EXPECT_EQ(x[0], 96);
  EXPECT_EQ(x[31], 127);
  void* only_y[2] = {nullptr, y.data()};
  d->read(3, train_ctx(1, 2), only_y);
  EXPECT_EQ(y[0], static_cast<int64_t>(replay_random(1, 2, 3) % uint64_t(300 - 32)) + 1);
  void* none[2] = {nullptr, nullptr};
  d->read(0, train_ctx(1, 2), none);
}

TEST(Tokens, ConcurrentReadsMatchSerial) {
  const std::string dir = make_temp_dir("ts_tokens_");
  auto d = ts::open_tokens("tokens:" + write_tokens(dir + "/t.bin", iota16(5000)) + ":16", ts::Split::Train);
  std::vector<int64_t> serial(d->size());
  for (int64_t i = 0; i < d->size(); ++i) serial[i] = read(*d, i, train_ctx(5, 1)).x[0];
  std::vector<int64_t> par(d->size(), -1);
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (int64_t i = k; i < d->size(); i += 4) par[i] = read(*d, i, train_ctx(5, 1)).x[0];
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(par, serial);
}

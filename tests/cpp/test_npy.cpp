// The .npy / .npz reader (src/data/npy.h): every element type, Fortran
// order, big-endian data, stored and deflated archives, the dataset's
// fields, splits and reads, and malformed inputs (each a ts::Error naming
// the file). Fixtures are written here byte by byte (npy_bytes follows
// numpy's own header layout exactly) and zipped with libzip; the fuzz
// corpus's files (tests/fuzz/corpus/npz) are numpy's own.
#include <gtest/gtest.h>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/npy.h"
#include "io/atomic_file.h"
#include "test_util.h"
#include "trainstep/error.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

namespace {

std::string shape_repr(const std::vector<int64_t>& s) {  // Python's repr of a tuple
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// A .npy file as numpy 1.24's np.save writes it: version 1.0, the dict
// repr, room for the growth axis to reach 21 digits, spaces to a multiple
// of 64 bytes with the newline.
std::string npy_bytes(const std::string& descr, bool fortran, const std::vector<int64_t>& shape,
                      const std::string& raw) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                  ", 'shape': " + shape_repr(shape) + ", }";
  if (!shape.empty()) h += std::string(21 - std::to_string(shape[fortran ? shape.size() - 1 : 0]).size(), ' ');
  const size_t pad = 64 - (10 + h.size() + 1) % 64;
  h += std::string(pad % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + raw;
}

template <typename T>
std::string raw_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The same elements with each one's bytes reversed (big-endian).
template <typename T>
std::string raw_big(const std::vector<T>& v) {
  std::string s = raw_of(v);
  for (size_t i = 0; i < s.size(); i += sizeof(T)) std::reverse(s.begin() + i, s.begin() + i + sizeof(T));
  return s;
}

ts::NpyArray parse(const std::string& b, const std::string& where = "t.npy") {
  return ts::parse_npy(reinterpret_cast<const uint8_t*>(b.data()), b.size(), where);
}

std::string parse_error(const std::string& b) {
  std::string msg = error_of([&] { parse(b, "bad.npy"); });
  EXPECT_EQ(msg.rfind("bad.npy", 0), 0u) << msg;
  return msg;
}

template <typename T>
std::vector<T> values(const ts::NpyArray& a) {
  EXPECT_EQ(a.data.size() % sizeof(T), 0u);
  std::vector<T> v(a.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

void write_file(const std::string& path, const std::string& bytes) {
  ts::write_file_atomic(path, bytes.data(), bytes.size());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Member {
  std::string name;
  std::string bytes;
  bool deflate = false;
};

// A zip written by libzip: each member stored or deflated.
void write_zip(const std::string& path, const std::vector<Member>& members) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(za, nullptr) << err;
  for (const auto& m : members) {
    zip_source_t* src = zip_source_buffer(za, m.bytes.data(), m.bytes.size(), 0);
    ASSERT_NE(src, nullptr);
    const zip_int64_t i = zip_file_add(za, m.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    ASSERT_GE(i, 0) << zip_strerror(za);
    ASSERT_EQ(zip_set_file_compression(za, static_cast<zip_uint64_t>(i),
                                       m.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0), 0);
  }
  ASSERT_EQ(zip_close(za), 0) << zip_strerror(za);
}

}  // namespace

TEST(NpyParse, HeaderMatchesNumpyByteForByte) {
  // np.save(f, np.arange(12, dtype=np.float32).reshape(3, 4)) with numpy 1.24.
  const std::string numpy_header =
      std::string("\x93NUMPY\x01\x00v\x00", 10) +
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" + std::string(58, ' ') + "\n";
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = float(i);
  const std::string mine = npy_bytes("<f4", false, {3, 4}, raw_of(v));
  ASSERT_EQ(numpy_header.size(), 128u);
  EXPECT_EQ(mine, numpy_header + raw_of(v));
  ts::NpyArray a = parse(mine);
  EXPECT_EQ(a.dtype, ts::DType::F32);
  EXPECT_EQ(a.shape, (ts::Shape{3, 4}));
  EXPECT_EQ(values<float>(a), v);
}

TEST(NpyParse, EveryElementType) {
  {
    auto a = parse(npy_bytes("<f4", false, {2}, raw_of<float>({1.5f, -2.f})));
    EXPECT_EQ(a.dtype, ts::DType::F32);
    EXPECT_EQ(values<float>(a), (std::vector<float>{1.5f, -2.f}));
  }
  {
    auto a = parse(npy_bytes("<f8", false, {2}, raw_of<double>({0.1, -1e300})));
    EXPECT_EQ(a.dtype, ts::DType::F64);
    EXPECT_EQ(values<double>(a), (std::vector<double>{0.1, -1e300}));
  }
  {  // float16: 1, -2, the smallest subnormal, 65504, inf, -0
    auto a = parse(npy_bytes("<f2", false, {6},
                             raw_of<uint16_t>({0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x8000})));
    EXPECT_EQ(a.dtype, ts::DType::F32);
    auto v = values<float>(a);
    ASSERT_EQ(v.size(), 6u);
    EXPECT_EQ(v[0], 1.f);
    EXPECT_EQ(v[1], -2.f);
    EXPECT_EQ(v[2], std::ldexp(1.f, -24));
    EXPECT_EQ(v[3], 65504.f);
    EXPECT_TRUE(std::isinf(v[4]) && v[4] > 0);
    EXPECT_TRUE(v[5] == 0.f && std::signbit(v[5]));
    auto nan = parse(npy_bytes("<f2", false, {1}, raw_of<uint16_t>({0x7e00})));
    EXPECT_TRUE(std::isnan(values<float>(nan)[0]));
  }
  {
    auto a = parse(npy_bytes("<i8", false, {2}, raw_of<int64_t>({INT64_MIN, 7})));
    EXPECT_EQ(a.dtype, ts::DType::I64);
    EXPECT_EQ(values<int64_t>(a), (std::vector<int64_t>{INT64_MIN, 7}));
  }
  {
    auto a = parse(npy_bytes("<i4", false, {2}, raw_of<int32_t>({-5, INT32_MAX})));
    EXPECT_EQ(a.dtype, ts::DType::I32);
    EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{-5, INT32_MAX}));
  }
  {  // widened to int32
    auto a = parse(npy_bytes("<i2", false, {2}, raw_of<int16_t>({-32768, 300})));
    EXPECT_EQ(a.dtype, ts::DType::I32);
    EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{-32768, 300}));
    auto b = parse(npy_bytes("|i1", false, {3}, raw_of<int8_t>({-128, 0, 127})));
    EXPECT_EQ(b.dtype, ts::DType::I32);
    EXPECT_EQ(values<int32_t>(b), (std::vector<int32_t>{-128, 0, 127}));
  }
  {
    auto a = parse(npy_bytes("|u1", false, {3}, raw_of<uint8_t>({0, 128, 255})));
    EXPECT_EQ(a.dtype, ts::DType::U8);
    EXPECT_EQ(values<uint8_t>(a), (std::vector<uint8_t>{0, 128, 255}));
  }
  {  // unsigned types without a dtype of their own widen
    auto a = parse(npy_bytes("<u2", false, {2}, raw_of<uint16_t>({65535, 1})));
    EXPECT_EQ(a.dtype, ts::DType::I32);
    EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{65535, 1}));
    auto b = parse(npy_bytes("<u4", false, {2}, raw_of<uint32_t>({4294967295u, 2})));
    EXPECT_EQ(b.dtype, ts::DType::I64);
    EXPECT_EQ(values<int64_t>(b), (std::vector<int64_t>{4294967295ll, 2}));
    auto c = parse(npy_bytes("<u8", false, {2}, raw_of<uint64_t>({uint64_t(INT64_MAX), 3})));
    EXPECT_EQ(c.dtype, ts::DType::I64);
    EXPECT_EQ(values<int64_t>(c), (std::vector<int64_t>{INT64_MAX, 3}));
    EXPECT_NE(parse_error(npy_bytes("<u8", false, {2}, raw_of<uint64_t>({3, uint64_t(1) << 63})))
                  .find("beyond int64"),
              std::string::npos);
  }
  {
    auto a = parse(npy_bytes("|b1", false, {3}, raw_of<uint8_t>({0, 1, 2})));
    EXPECT_EQ(a.dtype, ts::DType::Bool);
    EXPECT_EQ(values<uint8_t>(a), (std::vector<uint8_t>{0, 1, 1}));
  }
  {  // byte orders: '=' native, '>' swapped, '|' and '<' on one-byte types
    EXPECT_EQ(values<float>(parse(npy_bytes("=f4", false, {1}, raw_of<float>({2.5f})))),
              (std::vector<float>{2.5f}));
    EXPECT_EQ(values<int32_t>(parse(npy_bytes(">i4", false, {2}, raw_big<int32_t>({-2, 70000})))),
              (std::vector<int32_t>{-2, 70000}));
    EXPECT_EQ(values<double>(parse(npy_bytes(">f8", false, {1}, raw_big<double>({-0.75})))),
              (std::vector<double>{-0.75}));
    EXPECT_EQ(values<int64_t>(parse(npy_bytes(">i8", false, {1}, raw_big<int64_t>({-3})))),
              (std::vector<int64_t>{-3}));
    EXPECT_EQ(values<float>(parse(npy_bytes(">f4", false, {1}, raw_big<float>({3.25f})))),
              (std::vector<float>{3.25f}));
    EXPECT_EQ(values<int32_t>(parse(npy_bytes(">u2", false, {1}, raw_big<uint16_t>({0x1234})))),
              (std::vector<int32_t>{0x1234}));
    EXPECT_EQ(values<int32_t>(parse(npy_bytes(">i2", false, {1}, raw_big<int16_t>({-2})))),
              (std::vector<int32_t>{-2}));
    EXPECT_EQ(values<int64_t>(parse(npy_bytes(">u4", false, {1}, raw_big<uint32_t>({0x89abcdefu})))),
              (std::vector<int64_t>{0x89abcdefll}));
    EXPECT_EQ(values<float>(parse(npy_bytes(">f2", false, {1}, raw_big<uint16_t>({0x3c00})))),
              (std::vector<float>{1.f}));
    EXPECT_EQ(values<uint8_t>(parse(npy_bytes("<u1", false, {1}, raw_of<uint8_t>({9})))),
              (std::vector<uint8_t>{9}));
    EXPECT_EQ(parse(npy_bytes("<?", false, {1}, raw_of<uint8_t>({1}))).dtype, ts::DType::Bool);
  }
  for (const char* d : {"<c8", "<U3", "|S4", "|O", "<M8[ns]", "|V8", "float32", ""})
    EXPECT_NE(parse_error(npy_bytes(d, false, {0}, "")).find("unsupported element type"), std::string::npos) << d;
  EXPECT_NE(parse_error(npy_bytes("|f4", false, {1}, raw_of<float>({1.f}))).find("no byte order"),
            std::string::npos);
}

TEST(NpyParse, FortranOrderBecomesRowMajor) {
  // Element (i, j, k) of a 2x3x4 array is 100 i + 10 j + k; Fortran order
  // stores i fastest.
  std::vector<int32_t> f;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) f.push_back(100 * i + 10 * j + k);
  auto a = parse(npy_bytes("<i4", true, {2, 3, 4}, raw_of(f)));
  EXPECT_EQ(a.shape, (ts::Shape{2, 3, 4}));
  std::vector<int32_t> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(100 * i + 10 * j + k);
  EXPECT_EQ(values<int32_t>(a), want);
  // A widened, byte-swapped Fortran matrix.
  auto b = parse(npy_bytes(">i2", true, {2, 3}, raw_big<int16_t>({0, 3, 1, 4, 2, 5})));
  EXPECT_EQ(b.dtype, ts::DType::I32);
  EXPECT_EQ(values<int32_t>(b), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // One dimension or empty: nothing to move.
  EXPECT_EQ(values<int32_t>(parse(npy_bytes("<i4", true, {3}, raw_of<int32_t>({1, 2, 3})))),
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(parse(npy_bytes("<i4", true, {0, 3}, "")).data.empty());
}

TEST(NpyParse, Shapes) {
  EXPECT_EQ(parse(npy_bytes("<f4", false, {}, raw_of<float>({7.f}))).shape, ts::Shape{});
  EXPECT_EQ(parse(npy_bytes("<f4", false, {0}, "")).shape, ts::Shape{0});
  EXPECT_EQ(parse(npy_bytes("<f4", false, {2, 0, 3}, "")).shape, (ts::Shape{2, 0, 3}));
  EXPECT_EQ(parse(npy_bytes("<f4", false, {1, 1, 1, 1}, raw_of<float>({1.f}))).shape,
            (ts::Shape{1, 1, 1, 1}));
  // Version 2.0 (a u32 header length), Python 2 longs, double quotes, no
  // trailing comma or padding.
  std::string h = "{\"descr\": \"<i8\", \"shape\": (2L,), \"fortran_order\": False}\n";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  for (int s = 0; s < 32; s += 8) v2 += static_cast<char>((h.size() >> s) & 0xff);
  auto a = parse(v2 + h + raw_of<int64_t>({4, 5}));
  EXPECT_EQ(a.shape, ts::Shape{2});
  EXPECT_EQ(values<int64_t>(a), (std::vector<int64_t>{4, 5}));
  std::string v3 = v2;
  v3[6] = 3;
  EXPECT_EQ(parse(v3 + h + raw_of<int64_t>({4, 5})).shape, ts::Shape{2});
}

TEST(NpyParse, MalformedInputsAreErrorsNamingTheFile) {
  const std::string good = npy_bytes("<f4", false, {3, 4}, std::string(48, '\0'));
  auto with_header = [](const std::string& h) {
    std::string s = std::string("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    return s + h;
  };
  struct Case {
    std::string bytes, want;
  };
  const std::vector<Case> cases = {
      {"", "truncated"},
      {"\x93NUM", "truncated"},
      {"PK\x03\x04 not npy at all", "bad magic"},
      {std::string("\x93NUMPY\x04\x00\x00\x00", 10), "unsupported .npy version 4.0"},
      {std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated"},
      {good.substr(0, 60), "truncated: the header declares 118 bytes"},
      {good.substr(0, good.size() - 1), "truncated: shape (3, 4) of '<f4' needs 48 bytes of data, the file has 47"},
      {good + "x", "1 trailing bytes"},
      {with_header("['descr', '<f4']\n"), "not a Python dict"},
      {with_header("{'descr': '<f4', 'fortran_order': False}\n"), "missing 'shape'"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 'y'}\n"), "unknown key"},
      {with_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}\n"), "given twice"},
      {with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}\n"), "structured arrays"},
      {with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}\n"), "unsupported value"},
      {with_header("{'descr': 4, 'fortran_order': False, 'shape': (1,)}\n"), "unsupported value"},
      {with_header("{'descr': '<f4', 'fortran_order': 'no', 'shape': (1,)}\n"), "not True or False"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': 'x'}\n"), "not a tuple"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}\n"), "negative dimension"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}\n"), "expected ',' or ')'"},
      {with_header("{'descr': '<f4, 'fortran_order': False}"), "expected ',' or '}'"},
      {with_header("{'descr' '<f4'}"), "expected ':'"},
      {with_header("{descr: '<f4'}"), "expected a quoted key"},
      {with_header("{'descr': '<f4"), "unterminated string"},
      {with_header("{'descr': '<f4', "), "not closed"},
      {with_header("{'descr': '<f4'} trailing"), "unexpected text after the dict"},
      {with_header("{'descr': '\\x3cf4'}"), "escapes"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}\n"),
       "does not fit in 64 bits"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}\n"),
       "more than 2^63 elements"},
      {with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}\n"),
       "too large"},
      {with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}\n"),
       "more than 2^63 elements"},
      {with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000)}\n"),
       "needs 8000000000000000000 bytes of data, the file has 0"},
  };
  for (const auto& c : cases) {
    const std::string msg = parse_error(c.bytes);
    EXPECT_NE(msg.find(c.want), std::string::npos) << "want \"" << c.want << "\" in: " << msg;
  }
  // Every prefix of a valid file is rejected, never read past.
  for (size_t n = 0; n < good.size(); ++n) EXPECT_NE(parse_error(good.substr(0, n)), "<no error>");
}

TEST(NpzRead, StoredAndDeflatedMembers) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/d.npz";
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i) x[i] = 0.5f * float(i);
  write_zip(path, {{"x.npy", npy_bytes("<f4", false, {3, 2}, raw_of(x)), false},
                   {"y.npy", npy_bytes("<i8", false, {3}, raw_of<int64_t>({7, 8, 9})), true}});
  for (int from_memory = 0; from_memory < 2; ++from_memory) {
    std::vector<std::pair<std::string, ts::NpyArray>> a;
    if (from_memory) {
      const std::string b = read_file(path);
      a = ts::read_npz_bytes(reinterpret_cast<const uint8_t*>(b.data()), b.size(), path);
    } else {
      a = ts::read_npz(path);
    }
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].first, "x");
    EXPECT_EQ(a[0].second.shape, (ts::Shape{3, 2}));
    EXPECT_EQ(values<float>(a[0].second), x);
    EXPECT_EQ(a[1].first, "y");
    EXPECT_EQ(a[1].second.dtype, ts::DType::I64);
    EXPECT_EQ(values<int64_t>(a[1].second), (std::vector<int64_t>{7, 8, 9}));
  }
}

TEST(NpzRead, NumpyWrittenFiles) {
  // tests/fuzz/corpus/npz was written by numpy (np.savez, savez_compressed, np.save).
  const std::string dir = std::string(TRAINSTEP_FUZZ_DIR) + "/corpus/npz/";
  {
    auto a = ts::read_npz(dir + "mixed.npz");
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a[0].first, "x");
    EXPECT_EQ(a[0].second.shape, (ts::Shape{4, 3}));
    EXPECT_EQ(values<float>(a[0].second)[11], 11.f);
    EXPECT_EQ(values<int64_t>(a[1].second), (std::vector<int64_t>{1, 0, 1, 1}));
    EXPECT_EQ(a[2].second.dtype, ts::DType::Bool);
    EXPECT_EQ(values<uint8_t>(a[2].second), (std::vector<uint8_t>{1, 0, 1, 1}));
  }
  {
    auto a = ts::read_npz(dir + "compressed.npz");
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a[0].first, "ids");
    EXPECT_EQ(a[0].second.dtype, ts::DType::I32);
    EXPECT_EQ(values<int32_t>(a[0].second)[19], 19);
    EXPECT_EQ(values<int32_t>(a[1].second), (std::vector<int32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(values<float>(a[2].second), (std::vector<float>{0, 1, 2, 3, 4}));
  }
  {
    auto a = ts::read_npz(dir + "fortran_bigendian.npz");
    ASSERT_EQ(a.size(), 4u);
    EXPECT_EQ(values<double>(a[0].second), (std::vector<double>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(values<int32_t>(a[1].second), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(values<int32_t>(a[2].second), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(values<uint8_t>(a[3].second), (std::vector<uint8_t>{0, 1, 2}));
  }
  {
    auto a = ts::read_npz(dir + "positional.npz");
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].first, "arr_0");
    EXPECT_EQ(a[0].second.shape, (ts::Shape{2, 0}));
    EXPECT_EQ(a[1].first, "arr_1");
  }
  auto ds = ts::open_npz(dir + "plain.npy", ts::Split::All);
  EXPECT_EQ(ds->describe(), "npy file " + dir + "plain.npy: 3 samples of plain int64[2]");
}

TEST(NpzDataset, FieldsSplitsAndReads) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/data.npz";
  const int64_t n = 25;  // cut = 25 - 2 = 23
  std::vector<int64_t> ids(n * 4), label(n);
  std::vector<float> img(n * 2 * 3);
  std::vector<uint8_t> mask(n);
  for (int64_t i = 0; i < n * 4; ++i) ids[i] = 1000 + i;
  for (int64_t i = 0; i < n * 6; ++i) img[i] = float(i) / 8;
  for (int64_t i = 0; i < n; ++i) label[i] = i % 3, mask[i] = i & 1;
  write_zip(path, {{"input_ids.npy", npy_bytes("<i8", false, {n, 4}, raw_of(ids)), true},
                   {"label.npy", npy_bytes("<i8", false, {n}, raw_of(label)), false},
                   {"img.npy", npy_bytes("<f4", false, {n, 2, 3}, raw_of(img)), true},
                   {"mask.npy", npy_bytes("|b1", false, {n}, raw_of(mask)), false}});

  auto train = ts::open_npz(path, ts::Split::Train);
  auto test = ts::open_npz(path, ts::Split::Test);
  auto all = ts::open_npz(path, ts::Split::All);
  EXPECT_EQ(train->size(), 23);
  EXPECT_EQ(test->size(), 2);
  EXPECT_EQ(all->size(), 25);
  EXPECT_EQ(train->describe(), "npz file " + path +
                                   ": 23 samples of input_ids int64[4], label int64[], "
                                   "img float32[2, 3], mask bool[]");
  const auto f = train->fields();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].name, "input_ids");
  EXPECT_EQ(f[0].dtype, ts::DType::I64);
  EXPECT_EQ(f[0].shape, ts::Shape{4});
  EXPECT_EQ(f[1].name, "label");
  EXPECT_EQ(f[1].shape, ts::Shape{});
  EXPECT_EQ(f[2].dtype, ts::DType::F32);
  EXPECT_EQ(f[2].shape, (ts::Shape{2, 3}));
  EXPECT_EQ(f[3].dtype, ts::DType::Bool);

  auto check_row = [&](const ts::Dataset& d, int64_t i, int64_t row) {
    int64_t got_ids[4] = {}, got_label = -1;
    float got_img[6] = {};
    void* out[4] = {got_ids, &got_label, got_img, nullptr};  // mask: no port
    d.read(i, ts::ReadContext{}, out);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(got_ids[k], ids[row * 4 + k]);
    EXPECT_EQ(got_label, label[row]);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(got_img[k], img[row * 6 + k]);
  };
  check_row(*train, 0, 0);
  check_row(*train, 22, 22);
  check_row(*test, 0, 23);
  check_row(*test, 1, 24);
  check_row(*all, 24, 24);
  uint8_t m = 9;
  void* only_mask[4] = {nullptr, nullptr, nullptr, &m};
  test->read(0, ts::ReadContext{}, only_mask);  // row 23
  EXPECT_EQ(m, 1);
  test->read(1, ts::ReadContext{}, only_mask);  // row 24
  EXPECT_EQ(m, 0);

  // A single .npy: one field named after the file.
  const std::string npy = dir + "/x.npy";
  write_file(npy, npy_bytes("<i2", false, {10, 2}, raw_of<int16_t>(std::vector<int16_t>(20, -4))));
  auto one = ts::open_npz(npy, ts::Split::Train);
  EXPECT_EQ(one->size(), 9);
  ASSERT_EQ(one->fields().size(), 1u);
  EXPECT_EQ(one->fields()[0].name, "x");
  EXPECT_EQ(one->fields()[0].dtype, ts::DType::I32);
  EXPECT_EQ(ts::open_npz(npy, ts::Split::Test)->size(), 1);
  int32_t row[2] = {};
  void* out[1] = {row};
  one->read(8, ts::ReadContext{}, out);
  EXPECT_EQ(row[0], -4);
  EXPECT_EQ(row[1], -4);
}

TEST(NpzDataset, SplitSizes) {
  const std::string dir = make_temp_dir();
  for (int64_t n : {1, 9, 10, 11, 19, 20, 1000}) {
    const std::string p = dir + "/n" + std::to_string(n) + ".npy";
    write_file(p, npy_bytes("|u1", false, {n}, std::string(static_cast<size_t>(n), '\1')));
    const int64_t cut = n - n / 10;
    EXPECT_EQ(ts::open_npz(p, ts::Split::Train)->size(), cut) << n;
    EXPECT_EQ(ts::open_npz(p, ts::Split::All)->size(), n) << n;
    if (n >= 10) {
      EXPECT_EQ(ts::open_npz(p, ts::Split::Test)->size(), n / 10) << n;
    } else {
      const std::string msg = error_of([&] { ts::open_npz(p, ts::Split::Test); });
      EXPECT_NE(msg.find(p + ": the test split has no samples: the file has " + std::to_string(n) + " sample"),
                std::string::npos)
          << msg;
    }
  }
  const std::string empty = dir + "/empty.npy";
  write_file(empty, npy_bytes("<f4", false, {0, 3}, ""));
  EXPECT_NE(error_of([&] { ts::open_npz(empty, ts::Split::Train); }).find("train split has no samples: the file has 0 samples"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ts::open_npz(empty, ts::Split::All); }).find("no samples"), std::string::npos);
}

TEST(NpzDataset, Errors) {
  const std::string dir = make_temp_dir();
  {  // dim 0 disagrees: both arrays named with their shapes
    const std::string p = dir + "/mismatch.npz";
    write_zip(p, {{"a.npy", npy_bytes("<f4", false, {4, 2}, std::string(32, '\0'))},
                  {"b.npy", npy_bytes("<i8", false, {3}, std::string(24, '\0'))}});
    const std::string msg = error_of([&] { ts::open_npz(p, ts::Split::All); });
    EXPECT_NE(msg.find(p + ": the arrays disagree on the sample count (dim 0): a float32[4, 2] but b int64[3]"),
              std::string::npos)
        << msg;
  }
  {  // 0-d arrays
    const std::string p = dir + "/scalar.npy";
    write_file(p, npy_bytes("<f4", false, {}, raw_of<float>({1.f})));
    EXPECT_NE(error_of([&] { ts::open_npz(p, ts::Split::All); }).find("array scalar is 0-d"), std::string::npos);
  }
  {  // a truncated member names the file and the member
    const std::string p = dir + "/trunc.npz";
    std::string m = npy_bytes("<f4", false, {4}, std::string(16, '\0'));
    write_zip(p, {{"ok.npy", npy_bytes("|u1", false, {1}, "x")}, {"x.npy", m.substr(0, m.size() - 3), true}});
    const std::string msg = error_of([&] { ts::open_npz(p, ts::Split::All); });
    EXPECT_EQ(msg.rfind(p + ", member x.npy: truncated", 0), 0u) << msg;
  }
  {  // not a zip
    const std::string p = dir + "/garbage.npz";
    write_file(p, "this is not a zip file at all, just some text bytes");
    const std::string msg = error_of([&] { ts::open_npz(p, ts::Split::All); });
    EXPECT_EQ(msg.rfind(p + ": not a readable .npz (zip) file", 0), 0u) << msg;
  }
  {  // corrupt deflated data: the CRC or zlib catches it, naming the member
    const std::string p = dir + "/corrupt.npz";
    std::string big;
    for (int i = 0; i < 4000; ++i) big += static_cast<char>((i * 7919) % 251);
    write_zip(p, {{"w.npy", npy_bytes("|u1", false, {4000}, big), true}});
    std::string bytes = read_file(p);
    const size_t at = bytes.find("w.npy") + 5 + 100;  // inside the compressed data
    ASSERT_LT(at, bytes.size());
    bytes[at] = static_cast<char>(bytes[at] ^ 0x55);
    bytes[at + 1] = static_cast<char>(bytes[at + 1] ^ 0x55);
    write_file(p, bytes);
    const std::string msg = error_of([&] { ts::open_npz(p, ts::Split::All); });
    EXPECT_EQ(msg.rfind(p + ", member w.npy: ", 0), 0u) << msg;
    const std::string mem = error_of([&] {
      ts::read_npz_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem.npz");
    });
    EXPECT_EQ(mem.rfind("mem.npz, member w.npy: ", 0), 0u) << mem;
  }
  {  // a member that is not .npy; no members at all; a missing file
    const std::string p = dir + "/other.npz";
    write_zip(p, {{"readme.txt", "hello"}});
    EXPECT_NE(error_of([&] { ts::read_npz(p); }).find("member readme.txt: not a NAME.npy"), std::string::npos);
    EXPECT_NE(error_of([&] { ts::open_npz(dir + "/missing.npz", ts::Split::All); }).find("missing.npz: "),
              std::string::npos);
    const std::string e = dir + "/empty.npz";
    write_file(e, std::string("PK\x05\x06", 4) + std::string(18, '\0'));  // an empty zip
    EXPECT_NE(error_of([&] { ts::open_npz(e, ts::Split::All); }).find("no arrays"), std::string::npos);
  }
  {  // an empty file is not an archive
    const std::string p = dir + "/zero.npz";
    write_file(p, "");
    EXPECT_NE(error_of([&] { ts::read_npz(p); }).find("zero.npz: empty file"), std::string::npos);
  }
  {  // every prefix of a valid archive is an error, from memory
    const std::string p = dir + "/ok.npz";
    write_zip(p, {{"a.npy", npy_bytes("<f4", false, {2}, raw_of<float>({1, 2})), true},
                  {"b.npy", npy_bytes("<i8", false, {2}, raw_of<int64_t>({1, 2}))}});
    const std::string b = read_file(p);
    for (size_t n = 0; n < b.size(); ++n)
      EXPECT_NE(error_of([&] {
                  ts::read_npz_bytes(reinterpret_cast<const uint8_t*>(b.data()), n, "p.npz");
                }),
                "<no error>")
          << n;
  }
}

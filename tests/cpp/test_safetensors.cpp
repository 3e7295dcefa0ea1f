#include <gtest/gtest.h>

#include "test_util.h"
#include <stdlib.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "trainstep/error.h"
#include "io/atomic_file.h"
#include "io/checksum.h"
#include "io/safetensors.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

namespace {

// A file made by hand: length prefix, header text as given, then data.
std::string raw(const std::string& header, const std::string& data = "") {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] { ts::parse_safetensors(bytes, "m.st"); });
}

#define EXPECT_ERROR(bytes, phrase)                                           \
  do {                                                                        \
    std::string msg_ = parse_error(bytes);                                    \
    EXPECT_EQ(msg_.rfind("m.st: ", 0), 0u) << msg_;                           \
    EXPECT_NE(msg_.find(phrase), std::string::npos) << msg_;                  \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << "multi-line: " << msg_;  \
  } while (0)

template <class T>
ts::HostTensor filled(ts::DType dt, ts::Shape shape) {
  ts::HostTensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<T>()[i] = static_cast<T>(i * 3 + 1);
  return t;
}

}  // namespace

TEST(SafeTensors, RoundTripAllDtypes) {
  ts::HostTensor f32 = filled<float>(ts::DType::F32, {2, 3});
  ts::HostTensor f64 = filled<double>(ts::DType::F64, {3});
  ts::HostTensor i64 = filled<int64_t>(ts::DType::I64, {1, 1, 2});
  ts::HostTensor i32 = filled<int32_t>(ts::DType::I32, {5});
  ts::HostTensor u8 = filled<uint8_t>(ts::DType::U8, {7});
  ts::HostTensor b(ts::DType::Bool, {3});
  b.view.as<uint8_t>()[1] = 1;
  ts::HostTensor scalar = filled<float>(ts::DType::F32, {});
  ts::HostTensor empty(ts::DType::F32, {0, 4});
  ts::NamedTensors in = {{"w", &f32.view},    {"d", &f64.view}, {"step", &i64.view},
                         {"i", &i32.view},    {"u", &u8.view},  {"mask", &b.view},
                         {"s", &scalar.view}, {"e", &empty.view}};
  std::string bytes = ts::serialize_safetensors({{"format", "pt"}, {"k", "v"}}, in);

  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);  // data block is 8-byte aligned

  ts::SafeTensors st = ts::parse_safetensors(bytes, "mem");
  EXPECT_TRUE(st.checksummed);
  EXPECT_TRUE(ts::has_checksums(st.metadata));
  ts::strip_checksums(st.metadata);
  EXPECT_EQ(st.metadata.size(), 2u);
  EXPECT_EQ(st.metadata.at("format"), "pt");
  ASSERT_EQ(st.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    const ts::HostTensor* got = st.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->view.type(), t->type()) << name;
    EXPECT_EQ(std::memcmp(got->view.data, t->data, t->nbytes()), 0) << name;
  }
  EXPECT_EQ(st.find("nope"), nullptr);
  // File order follows data offsets, which follow the write order.
  EXPECT_EQ(st.tensors[0].first, "w");
  EXPECT_EQ(st.find("s")->view.shape, ts::Shape{});
}

TEST(SafeTensors, WriteAndReadFile) {
  std::string dir = testing::TempDir() + "ts_st_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::string path = dir + "/model.safetensors";
  ts::HostTensor t = filled<float>(ts::DType::F32, {4});
  ts::write_safetensors(path, {}, {{"x", &t.view}});
  ts::SafeTensors st = ts::read_safetensors(path);
  ts::strip_checksums(st.metadata);
  EXPECT_TRUE(st.metadata.empty());
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].second.view.as<float>()[3], 10.0f);
  EXPECT_EQ(ts::read_file(path), ts::serialize_safetensors({}, {{"x", &t.view}}));
}

TEST(SafeTensors, ReadsHandWrittenFileInAnyKeyOrder) {
  std::string data(12, '\0');
  data[0] = 1;   // b: U8[4] at [0, 4)
  data[4] = 42;  // a: I64[] at [4, 12)
  std::string h = R"({"a":{"dtype":"I64","shape":[],"data_offsets":[4,12]},)"
                  R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  ts::SafeTensors st = ts::parse_safetensors(raw(h, data), "m.st");
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors[0].first, "b");
  EXPECT_EQ(st.tensors[1].second.view.as<int64_t>()[0], 42);
}

TEST(SafeTensors, MissingFile) {
  EXPECT_EQ(error_of([] { ts::read_safetensors("/nonexistent.st"); }), "/nonexistent.st: no such file");
}

TEST(SafeTensors, WriterRejectsBadInput) {
  ts::HostTensor t(ts::DType::F32, {1});
  EXPECT_NE(error_of([&] { ts::serialize_safetensors({}, {{"a", &t.view}, {"a", &t.view}}); })
                .find("duplicate tensor name 'a'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ts::serialize_safetensors({}, {{"__metadata__", &t.view}}); })
                .find("cannot be a tensor name"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ts::write_safetensors("/nonexistent/x.st", {}, {{"a", &t.view}}); })
                .find("/nonexistent/x.st: cannot write"),
            std::string::npos);
}

TEST(SafeTensors, RejectsShortFile) { EXPECT_ERROR(std::string(5, '\0'), "too short"); }

TEST(SafeTensors, RejectsHugeHeaderLength) {
  std::string b(8, '\0');
  b[4] = 1;  // 2^32
  EXPECT_ERROR(b + "{}", "exceeds the 100 MiB limit");
}

TEST(SafeTensors, RejectsTruncatedHeader) {
  std::string b = raw("{}");
  b[0] = 100;
  EXPECT_ERROR(b, "truncated: header says 100 bytes");
}

TEST(SafeTensors, RejectsInvalidJson) { EXPECT_ERROR(raw("{\"a\":"), "not valid JSON"); }

TEST(SafeTensors, RejectsNonObjectHeader) { EXPECT_ERROR(raw("[1, 2]"), "not a JSON object"); }

TEST(SafeTensors, RejectsNonObjectEntry) { EXPECT_ERROR(raw(R"({"a": 3})"), "entry is not a JSON object"); }

TEST(SafeTensors, RejectsMissingField) {
  EXPECT_ERROR(raw(R"({"a": {"dtype": "F32", "shape": []}})"), "missing \"data_offsets\"");
}

TEST(SafeTensors, RejectsUnknownDtype) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})", "xx"),
               "tensor 'a': unknown dtype 'F16'");
  // The long names are valid elsewhere in the runtime but not in this format.
  EXPECT_ERROR(raw(R"({"a":{"dtype":"float32","shape":[1],"data_offsets":[0,4]}})", "xxxx"),
               "unknown dtype 'float32'");
}

TEST(SafeTensors, RejectsBadShape) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":3,"data_offsets":[0,3]}})", "xxx"), "shape is not a list");
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})"), "non-negative integers");
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})"), "non-negative integers");
}

TEST(SafeTensors, RejectsHighRank) {
  std::string shape = "[1";
  for (int i = 0; i < 16; ++i) shape += ",1";
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":)" + shape + R"(],"data_offsets":[0,1]}})", "x"),
               "rank 17 exceeds the limit of 16");
}

TEST(SafeTensors, RejectsOverflowingShape) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
               "overflows the element count");
  EXPECT_ERROR(raw(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})"),
               "overflows the byte size");
}

TEST(SafeTensors, RejectsSizeMismatch) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx"),
               "size mismatch: F32[2] needs 8 bytes, data_offsets span 4");
}

TEST(SafeTensors, RejectsOffsetsOutOfBlock) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "xx"),
               "out of the data block (2 bytes)");
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", "xxx"), "out of the data block");
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "x"),
               "data_offsets is not a list of two non-negative integers");
}

TEST(SafeTensors, RejectsOverlap) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                   "xxxx"),
               "tensors 'a' and 'b' overlap");
}

TEST(SafeTensors, RejectsGap) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "xxxx"),
               "bytes [0, 2) of the data block are not covered");
}

TEST(SafeTensors, RejectsTrailingData) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "xxxx"),
               "data block has 4 bytes but tensors cover 2");
}

TEST(SafeTensors, RejectsDuplicateNames) {
  EXPECT_ERROR(raw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                   R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                   "xx"),
               "duplicate key 'a'");
}

TEST(SafeTensors, RejectsNonStringMetadata) {
  EXPECT_ERROR(raw(R"({"__metadata__":{"epoch":3}})"), "metadata value for 'epoch' is not a string");
  EXPECT_ERROR(raw(R"({"__metadata__":[1]})"), "__metadata__ is not a JSON object");
}

namespace {

// A written file with two tensors, and where each tensor's bytes start.
struct Written {
  std::string bytes;
  size_t data_start;
};
Written two_tensors() {
  static ts::HostTensor a = filled<float>(ts::DType::F32, {64});
  static ts::HostTensor b = filled<int64_t>(ts::DType::I64, {3});
  Written w;
  w.bytes = ts::serialize_safetensors({{"format", "trainstep"}}, {{"a", &a.view}, {"b", &b.view}});
  uint64_t n;
  std::memcpy(&n, w.bytes.data(), 8);
  w.data_start = 8 + n;
  return w;
}

// The same file as an older writer wrote it: header without the checksum keys.
std::string without_checksums(const std::string& bytes) {
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  for (const char* k : {ts::kChecksumAlgorithmKey, ts::kTensorChecksumsKey, ts::kHeaderChecksumKey})
    h["__metadata__"].erase(k);
  return raw(h.dump(), bytes.substr(8 + n));
}

}  // namespace

TEST(SafeTensorsChecksums, EveryFlippedDataBitIsNamedWithItsTensor) {
  const Written w = two_tensors();
  for (size_t i = w.data_start; i < w.bytes.size(); ++i) {
    std::string bad = w.bytes;
    bad[i] ^= static_cast<char>(1 << (i % 8));
    const std::string e = error_of([&] { ts::parse_safetensors(bad, "m.tstep"); });
    const char* tensor = i < w.data_start + 64 * 4 ? "'a'" : "'b'";
    EXPECT_NE(e.find("m.tstep: tensor " + std::string(tensor) + " is corrupt: checksum "), std::string::npos)
        << i << ": " << e;
    EXPECT_NE(e.find("expected "), std::string::npos) << e;
  }
}

TEST(SafeTensorsChecksums, EveryFlippedHeaderBitIsCaught) {
  const Written w = two_tensors();
  for (size_t bit = 0; bit < w.data_start * 8; ++bit) {
    std::string bad = w.bytes;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    EXPECT_THROW(ts::parse_safetensors(bad, "m.tstep"), ts::Error) << "bit " << bit;
  }
}

TEST(SafeTensorsChecksums, AChangedMetadataValueFailsTheHeaderChecksum) {
  const Written w = two_tensors();
  // Same length, so only the checksum can notice: "trainstep" -> "trainstop".
  std::string bad = w.bytes;
  bad.replace(bad.find("trainstep"), 9, "trainstop");
  EXPECT_NE(error_of([&] { ts::parse_safetensors(bad, "m.tstep"); })
                .find("m.tstep: the header is corrupt: header checksum "),
            std::string::npos);
}

TEST(SafeTensorsChecksums, FilesWithoutChecksumsStillLoad) {
  const Written w = two_tensors();
  ts::SafeTensors st = ts::parse_safetensors(without_checksums(w.bytes), "old.tstep");
  EXPECT_FALSE(st.checksummed);
  EXPECT_FALSE(ts::has_checksums(st.metadata));
  ts::SafeTensors now = ts::parse_safetensors(w.bytes, "new.tstep");
  ASSERT_EQ(st.tensors.size(), now.tensors.size());
  for (size_t i = 0; i < st.tensors.size(); ++i)
    EXPECT_EQ(std::memcmp(st.tensors[i].second.view.data, now.tensors[i].second.view.data,
                          now.tensors[i].second.view.nbytes()), 0);
}

TEST(SafeTensorsChecksums, PartialChecksumKeysAreRefused) {
  const Written w = two_tensors();
  uint64_t n;
  std::memcpy(&n, w.bytes.data(), 8);
  nlohmann::json h = nlohmann::json::parse(w.bytes.substr(8, n));
  h["__metadata__"].erase(ts::kHeaderChecksumKey);
  EXPECT_NE(error_of([&] { ts::parse_safetensors(raw(h.dump(), w.bytes.substr(8 + n)), "m"); })
                .find("m: the header is damaged: it has checksums but no 'header_checksum' entry"),
            std::string::npos);
}

TEST(SafeTensorsChecksums, ReadingTheFileChecksAsParsingDoes) {
  const std::string dir = make_temp_dir();
  const Written w = two_tensors();
  std::string bad = w.bytes;
  bad.back() ^= 1;
  const std::string path = dir + "/bad.ckpt";
  ts::write_file_atomic(path, bad.data(), bad.size());
  EXPECT_NE(error_of([&] { ts::read_safetensors(path); }).find(path + ": tensor 'b' is corrupt"),
            std::string::npos);
  // The header alone is fine: metadata readers see no damage in the data.
  EXPECT_EQ(ts::read_safetensors_metadata(path).at("format"), "trainstep");
}

TEST(SafeTensorsChecksums, ChecksummerMatchesOneShotHash) {
  const Written w = two_tensors();
  ts::Checksummer c;
  for (size_t i = 0; i < w.bytes.size(); i += 7) c.update(w.bytes.data() + i, std::min<size_t>(7, w.bytes.size() - i));
  EXPECT_EQ(c.hex(), ts::checksum_hex(w.bytes.data(), w.bytes.size()));
}

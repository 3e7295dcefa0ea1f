// TensorBoard event-file encoding (train/event_file.h): CRC-32C, varints,
// TFRecord framing and Event bytes. Expected values are published check
// values (CRC-32C) or bytes that tensorboard's own Python writer and
// protobuf classes produce (tensorboard 2.21.0: RecordWriter, event_pb2);
// tests/python/test_logdir.py reads a whole run back with tensorboard.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "io/crc32c.h"
#include "train/event_file.h"
#include "trainstep/error.h"

namespace {

std::string hex(const std::string& s) {
  std::string out;
  char b[3];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

std::string varint(uint64_t v) {
  std::string s;
  ts::put_varint(s, v);
  return hex(s);
}

TEST(Crc32c, PublishedCheckValues) {
  EXPECT_EQ(ts::crc32c("123456789", 9), 0xE3069283u);  // the algorithm's check value
  EXPECT_EQ(ts::crc32c("", 0), 0u);
  // RFC 3720 (iSCSI), appendix B.4: 32 bytes of 0x00, of 0xFF, 0..31, 31..0.
  std::string zeros(32, '\0'), ones(32, '\xFF'), up, down;
  for (int i = 0; i < 32; ++i) {
    up += static_cast<char>(i);
    down += static_cast<char>(31 - i);
  }
  EXPECT_EQ(ts::crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(ts::crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(ts::crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(ts::crc32c(down.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32c, ContinuesAcrossPieces) {
  const uint32_t part = ts::crc32c("1234", 4);
  EXPECT_EQ(ts::crc32c("56789", 5, part), 0xE3069283u);
}

TEST(Crc32c, MaskIsTfRecords) {
  EXPECT_EQ(ts::mask_crc32c(0), 0xA282EAD8u);  // the mask's offset
  EXPECT_EQ(ts::mask_crc32c(1u << 15), 0xA282EAD9u);  // rotated right by 15
}

TEST(EventFile, Varint) {
  EXPECT_EQ(varint(0), "00");
  EXPECT_EQ(varint(1), "01");
  EXPECT_EQ(varint(127), "7f");
  EXPECT_EQ(varint(128), "8001");
  EXPECT_EQ(varint(150), "9601");  // protobuf's encoding guide
  EXPECT_EQ(varint(300), "ac02");
  EXPECT_EQ(varint(~0ull), "ffffffffffffffffff01");
}

TEST(EventFile, RecordFramingMatchesTensorboardsWriter) {
  EXPECT_EQ(hex(ts::tfrecord("trainstep")),
            "0900000000000000"  // length
            "37f97139"          // masked CRC of the length
            "747261696e73746570"
            "14c232a3");  // masked CRC of the data
}

TEST(EventFile, EventsMatchProtobufs) {
  EXPECT_EQ(hex(ts::version_event(1.5)), "09000000000000f83f1a0d627261696e2e4576656e743a32");
  EXPECT_EQ(hex(ts::scalars_event(1.5, 7, {{"a/b", 0.25f}, {"c", -2.0f}})),
            "09000000000000f83f10072a160a0a0a03612f62150000803e0a080a016315000000c0");
  EXPECT_EQ(hex(ts::scalars_event(1.5, 300, {})), "09000000000000f83f10ac022a00");
}

TEST(EventFile, WritesVersionThenScalars) {
  const std::string dir = ::testing::TempDir() + "event_file_test";
  std::string path;
  {
    ts::EventFile f(dir);
    path = f.path();
    f.write(7, {{"a/b", 0.25f}, {"c", -2.0f}}, 1.5);
    f.flush();
  }
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos) << path;
  EXPECT_EQ(path.substr(path.size() - 10), ".trainstep") << path;
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string last = ts::tfrecord(ts::scalars_event(1.5, 7, {{"a/b", 0.25f}, {"c", -2.0f}}));
  ASSERT_GT(bytes.size(), last.size());
  EXPECT_EQ(bytes.substr(bytes.size() - last.size()), last);
  EXPECT_EQ(bytes.substr(8 + 4 + 9, 15), std::string("\x1a\x0d" "brain.Event:2"));
  std::remove(path.c_str());
}

TEST(EventFile, UnwritableFolderNamesThePath) {
  const std::string file = ::testing::TempDir() + "event_file_not_a_dir";
  std::ofstream(file) << "x";
  try {
    ts::EventFile f(file + "/logs");
    FAIL() << "no error";
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/logs"), std::string::npos) << e.what();
  }
  std::remove(file.c_str());
}

}  // namespace

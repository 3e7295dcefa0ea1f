#include <gtest/gtest.h>

#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "trainstep/error.h"
#include "io/atomic_file.h"

using ts_test::error_of;
using ts_test::make_temp_dir;


TEST(AtomicFile, WriteReadRoundTripAndOverwrite) {
  std::string dir = make_temp_dir();
  std::string p = dir + "/a.bin";
  ts::write_file_atomic(p, "hello", 5);
  EXPECT_EQ(ts::read_file(p), "hello");
  std::string a = "abc", b = std::string("\0xyz", 4);
  ts::write_file_atomic(p, {{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()}});
  EXPECT_EQ(ts::read_file(p), a + b);
  ts::write_file_atomic(p, nullptr, 0);
  EXPECT_EQ(ts::read_file(p), "");
  // No temp file is left behind after a successful write.
  EXPECT_NE(access((p + ".tmp." + std::to_string(getpid())).c_str(), F_OK), 0);
}

TEST(AtomicFile, ReadMissingFile) {
  std::string msg = error_of([] { ts::read_file("/nonexistent/x.bin"); });
  EXPECT_EQ(msg, "/nonexistent/x.bin: no such file");
}

TEST(AtomicFile, ReadDirectoryFails) {
  std::string dir = make_temp_dir();
  std::string msg = error_of([&] { ts::read_file(dir); });
  EXPECT_NE(msg.find(dir + ": cannot read:"), std::string::npos) << msg;
}

TEST(AtomicFile, WriteIntoMissingDirectoryFails) {
  std::string msg = error_of([] { ts::write_file_atomic("/nonexistent/dir/x.bin", "x", 1); });
  EXPECT_NE(msg.find("/nonexistent/dir/x.bin: cannot write:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

TEST(AtomicFile, FailedRenameRemovesTempFile) {
  // Renaming a file over a non-empty directory fails after the temp file is
  // written; the temp file must be cleaned up.
  std::string dir = make_temp_dir();
  std::string target = dir + "/sub";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  ts::write_file_atomic(target + "/keep", "k", 1);
  std::string msg = error_of([&] { ts::write_file_atomic(target, "x", 1); });
  EXPECT_NE(msg.find(target + ": cannot rename temp file:"), std::string::npos) << msg;
  EXPECT_NE(access((target + ".tmp." + std::to_string(getpid())).c_str(), F_OK), 0);
}

// trainstep/check.h: check_file reports what `trainstep check` prints
// (tests/python/test_integrity.py checks the CLI's lines) and throws for a
// file that fails a check.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"
#include "tiny_artifact.h"
#include "trainstep/check.h"
#include "trainstep/session.h"

using ts_test::error_of;
using ts_test::make_temp_dir;

TEST(CheckFile, AnArtifact) {
  const std::string dir = make_temp_dir();
  const std::string art = ts_test::write_tiny_artifact(dir);
  const ts::CheckReport r = ts::check_file(art);
  EXPECT_EQ(r.kind, ts::FileKind::Artifact);
  EXPECT_GE(r.functions, 1u);
  EXPECT_GE(r.tensors, 1u);
  EXPECT_GT(r.tensor_bytes, 0u);
  EXPECT_EQ(r.checksummed, !r.checksum_algorithm.empty());
  EXPECT_FALSE(r.epoch.has_value());
}

TEST(CheckFile, ACheckpointSavedOutsideTrainAndItsArtifact) {
  const std::string dir = make_temp_dir();
  const std::string art = ts_test::write_tiny_artifact(dir);
  const std::string ck = dir + "/w.ckpt";
  auto s = ts::Session::open(art);
  s->set_step(7);
  s->save_checkpoint(ck);
  const ts::CheckReport r = ts::check_file(ck, art);
  EXPECT_EQ(r.kind, ts::FileKind::Checkpoint);
  EXPECT_EQ(r.step, 7);
  EXPECT_FALSE(r.epoch.has_value());  // no run position
  EXPECT_TRUE(r.checksummed);
  EXPECT_EQ(r.checksum_algorithm, "xxh3_64");
  // The checkpoint does not fit an artifact with another state name.
  const std::string other = ts_test::write_tiny_artifact(make_temp_dir(), "v");
  EXPECT_NE(error_of([&] { ts::check_file(ck, other); }), "<no error>");
}

TEST(CheckFile, ANonTrainstepFileIsAnError) {
  const std::string path = make_temp_dir() + "/x.bin";
  std::ofstream(path) << "not a safetensors file";
  EXPECT_NE(error_of([&] { ts::check_file(path); }).find(path), std::string::npos);
  EXPECT_NE(error_of([&] { ts::check_file(path + ".missing"); }), "<no error>");
}

TEST(CheckFile, HelpersForTheCliLine) {
  EXPECT_EQ(ts::bytes_str(512), "512 bytes");
  EXPECT_EQ(ts::bytes_str(1536), "1.50 KiB");
  EXPECT_NE(ts::unchecked_notice("a.tstep").find("a.tstep"), std::string::npos);
}

// Reading metrics.jsonl back (train/metrics_read.h) for `trainstep plot`:
// what MetricsLog writes reads back, and a bad file is one error naming the
// file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "test_util.h"
#include "trainstep/metrics_log.h"
#include "train/metrics_read.h"
#include "trainstep/error.h"

namespace {

std::string write(const std::string& text) {
  const std::string path = ts_test::make_temp_dir() + "/metrics.jsonl";
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    ts::read_metrics(path);
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "";
}

TEST(MetricsRead, ReadsWhatTheLogWrites) {
  const std::string dir = ts_test::make_temp_dir();
  {
    ts::MetricsLog log(dir);
    ts::BatchProgress b;
    b.epoch = 1, b.batch = 1, b.batches = 1, b.step = 1, b.loss = 2.5, b.batch_size = 4;
    log.on_batch(b);
    log.on_note(ts::Note::Resumed, "resumed");
    ts::EpochReport r;
    r.epoch = 1, r.step = 1, r.train_loss = 2.5, r.test.loss = NAN;
    r.test.has_accuracy = true, r.test.accuracy = 0.75;
    log.on_epoch(r);
  }
  const ts::Metrics m = ts::read_metrics(dir + "/metrics.jsonl");
  ASSERT_EQ(m.batches.size(), 1u);
  EXPECT_EQ(m.batches[0].step, 1);
  EXPECT_EQ(m.batches[0].loss, 2.5);
  ASSERT_EQ(m.epochs.size(), 1u);
  EXPECT_EQ(m.epochs[0].train_loss, 2.5);
  EXPECT_TRUE(std::isnan(m.epochs[0].test_loss));  // written as null
  EXPECT_TRUE(m.epochs[0].has_accuracy);
  EXPECT_EQ(m.epochs[0].test_accuracy, 0.75);
}

TEST(MetricsRead, BadFilesNameTheFileAndLine) {
  const std::string ok = R"({"event":"batch","epoch":1,"step":1,"loss":1.0})";
  std::string p = write(ok + "\n{\"event\":\"batch\",\"epo");
  EXPECT_EQ(error_of(p), p + ":2: not a JSON object (a line cut short?)");
  p = write(ok + "\n\n" + R"({"event":"epoch","epoch":1,"step":"x"})" + "\n");
  EXPECT_EQ(error_of(p), p + ":3: no integer \"step\"");
  p = write(R"({"event":"party"})");
  EXPECT_EQ(error_of(p), p + ":1: unknown event \"party\"");
  p = write("");
  EXPECT_EQ(error_of(p), p + ": empty, nothing to plot");
  p = write(R"({"event":"note","kind":"resumed","text":"x"})");
  EXPECT_EQ(error_of(p), p + ": no batch or epoch lines to plot");
  EXPECT_NE(error_of(p + ".missing").find(p + ".missing: "), std::string::npos);
}

}  // namespace

// train() reports through its TrainObserver and prints nothing itself
// (train/trainer.h); on the tiny hand-built artifact, so it runs in ms.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tiny_artifact.h"
#include "trainstep/train.h"

namespace {

// 10 samples of 4 floats, class labels 0..2.
struct TinyData : ts::Dataset {
  int64_t size() const override { return 10; }
  std::string describe() const override { return "4 floats with int64 labels"; }
  void check(int64_t, const ts::TensorType&, const ts::TensorType&) const override {}
  void write(int64_t i, int64_t r, const ts::Tensor& x, const ts::Tensor& y) const override {
    for (int k = 0; k < 4; ++k) x.as<float>()[r * 4 + k] = 0.01f * (i + k);
    y.as<int64_t>()[r] = i % 3;
  }
};

struct Recorder : ts::TrainObserver {
  std::vector<ts::BatchProgress> batches;
  std::vector<ts::EpochReport> epochs;
  std::vector<std::pair<ts::Note, std::string>> notes;
  void on_note(ts::Note k, const std::string& t) override { notes.push_back({k, t}); }
  void on_batch(const ts::BatchProgress& p) override { batches.push_back(p); }
  void on_epoch(const ts::EpochReport& r) override { epochs.push_back(r); }
};

TEST(TrainObserver, GetsEveryBatchAndEpochAndNothingIsPrinted) {
  auto s = ts::Session::open(ts_test::write_tiny_artifact(ts_test::make_temp_dir()));
  TinyData data;
  ts::TrainOptions o;
  o.epochs = 2;
  o.checkpoint_dir = ts_test::make_temp_dir();
  o.resume = "auto";  // an empty folder: a note, then a fresh start
  Recorder rec;
  ts::ObserverList list;
  list.all = {&rec};
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  ts::train(*s, data, data, o, &list);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  ASSERT_EQ(rec.notes.size(), 1u);
  EXPECT_EQ(rec.notes[0].first, ts::Note::NoCheckpoint);
  EXPECT_EQ(rec.notes[0].second,
            "no checkpoint in " + o.checkpoint_dir + ": starting from the initial state");
  ASSERT_EQ(rec.batches.size(), 10u);  // 2 epochs of 5 batches of 2
  for (size_t i = 0; i < rec.batches.size(); ++i) {
    const ts::BatchProgress& p = rec.batches[i];
    EXPECT_EQ(p.epoch, 1 + static_cast<int64_t>(i) / 5);
    EXPECT_EQ(p.batch, 1 + static_cast<int64_t>(i) % 5);
    EXPECT_EQ(p.timed_batches, p.batch);
    EXPECT_EQ(p.batches, 5);
    EXPECT_EQ(p.batch_size, 2);
    EXPECT_EQ(p.step, static_cast<int64_t>(i) + 1);
    EXPECT_GE(p.seconds, 0);
  }
  ASSERT_EQ(rec.epochs.size(), 2u);
  EXPECT_EQ(rec.epochs[1].epoch, 2);
  EXPECT_EQ(rec.epochs[1].step, 10);
  EXPECT_DOUBLE_EQ(rec.epochs[0].train_loss, rec.batches[4].loss);  // the epoch's running mean
  EXPECT_TRUE(rec.epochs[0].test.has_accuracy);
}

TEST(TrainObserver, NoObserverIsQuiet) {
  auto s = ts::Session::open(ts_test::write_tiny_artifact(ts_test::make_temp_dir()));
  TinyData data;
  testing::internal::CaptureStderr();
  ts::TrainResult r = ts::train(*s, data, data, ts::TrainOptions{});
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(r.epochs_done, 1);
}

// TinyData as fields, each read taking `sleep`: a slow loader.
struct SlowData : ts::Dataset {
  std::chrono::milliseconds sleep{0};
  int64_t size() const override { return 10; }
  std::string describe() const override { return "4 floats with int64 labels, slowly"; }
  std::vector<ts::Field> fields() const override {
    return {{"x", ts::DType::F32, {4}}, {"y", ts::DType::I64, {}}};
  }
  void read(int64_t i, const ts::ReadContext&, void* const* out) const override {
    std::this_thread::sleep_for(sleep);
    if (out[0])
      for (int k = 0; k < 4; ++k) static_cast<float*>(out[0])[k] = 0.01f * (i + k);
    if (out[1]) *static_cast<int64_t*>(out[1]) = i % 3;
  }
};

std::vector<std::vector<char>> state_bytes(const ts::Session& s) {
  std::vector<std::vector<char>> out;
  for (const std::string& n : s.state_names()) {
    const ts::Tensor& t = s.state(n);
    out.emplace_back(static_cast<const char*>(t.data), static_cast<const char*>(t.data) + t.nbytes());
  }
  return out;
}

// The deprecated x/y form and fields train alike; loader threads change
// nothing; a loader that holds the steps up is said once, with the fix.
TEST(TrainObserver, FieldsLoaderThreadsAndASlowLoader) {
  const std::string art = ts_test::write_tiny_artifact(ts_test::make_temp_dir());
  ts::TrainOptions o;
  o.epochs = 2;
  auto old_style = ts::Session::open(art);
  TinyData tiny;
  ts::train(*old_style, tiny, tiny, o);
  SlowData fast;
  for (int threads : {1, 3}) {
    auto s = ts::Session::open(art);
    o.data_threads = threads;
    ts::train(*s, fast, fast, o);
    EXPECT_EQ(state_bytes(*s), state_bytes(*old_style)) << threads << " data threads";
  }
  SlowData slow;
  slow.sleep = std::chrono::milliseconds(60);  // 0.6 s an epoch, nearly all of it waiting
  o.data_threads = 1;
  auto s = ts::Session::open(art);
  Recorder rec;
  ts::ObserverList list;
  list.all = {&rec};
  ts::train(*s, slow, fast, o, &list);
  ASSERT_EQ(rec.notes.size(), 1u);  // once, though both epochs were slow
  EXPECT_EQ(rec.notes[0].first, ts::Note::SlowData);
  EXPECT_NE(rec.notes[0].second.find("% of epoch 1: the loader is behind; more loader threads "
                                     "may help (--data-threads, now 1)"), std::string::npos)
      << rec.notes[0].second;
  EXPECT_GT(rec.epochs[0].data_wait, 0.5 * rec.epochs[0].seconds);
  EXPECT_LE(rec.epochs[0].data_wait, rec.epochs[0].seconds);
}

TEST(TrainObserver, AboutTenLoggedBatchesAnEpochAndTheLast) {
  int logged = 0;
  for (int64_t b = 1; b <= 937; ++b) logged += ts::batch_logged(b, 937);
  EXPECT_EQ(logged, 11);  // every 93rd, and 937
  EXPECT_TRUE(ts::batch_logged(937, 937));
  for (int64_t b = 1; b <= 6; ++b) EXPECT_TRUE(ts::batch_logged(b, 6));
}

}  // namespace

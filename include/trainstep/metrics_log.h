// `train --log-dir DIR`, public: a TrainObserver that writes what a run
// reports to files people can watch while it runs (ts::read_metrics,
// trainstep/metrics.h, reads metrics.jsonl back).
//
//   DIR/events.out.tfevents.*  TensorBoard scalars, at
//                              the global step:
//     per logged batch (batch_logged(), ~10 an epoch):
//       train/loss (the epoch's mean so far, as the progress line shows),
//       train/lr, train/samples_per_s, train/step_time_s (mean since the
//       last logged batch)
//     per epoch: epoch/train_loss, epoch/test_loss, epoch/test_accuracy
//       (class targets only), epoch/lr, epoch/samples_per_s
//   DIR/metrics.jsonl          one JSON object a line, appended (a resumed
//                              run adds to it): "event" is "batch", "epoch"
//                              or "note", with the same values as doubles
//                              (non-finite ones as null) plus "time" (Unix
//                              seconds), "epoch" and "step".
//
// Both files are flushed after every entry. A folder or file that cannot be
// created or written is a ts::Error naming it, from the constructor (before
// training starts) or the call that failed.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "trainstep/train.h"

namespace ts {

class EventFile;

class MetricsLog : public TrainObserver {
 public:
  explicit MetricsLog(const std::string& dir);
  ~MetricsLog() override;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void on_note(Note kind, const std::string& text) override;
  void on_batch(const BatchProgress& p) override;
  void on_epoch(const EpochReport& r) override;

  const std::string& event_path() const;
  const std::string& jsonl_path() const { return jsonl_path_; }

 private:
  void write_line(const std::string& line);
  std::unique_ptr<EventFile> events_;
  std::string jsonl_path_;
  std::FILE* jsonl_ = nullptr;
  // The last logged batch of the epoch, for the mean step time since.
  int64_t last_timed_ = 0;
  double last_seconds_ = 0;
};

}  // namespace ts

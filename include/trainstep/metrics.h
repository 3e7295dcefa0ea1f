// A training run's metrics read back, public: DIR/metrics.jsonl, the log
// `train --log-dir DIR` (TrainOptions::log_dir) writes a line to per batch
// and per epoch. It is what `trainstep plot` draws; a program of its own
// reads a run's curves without parsing the JSON lines itself.
//
// Only what the curves need is kept; a null value (non-finite when written)
// is NaN here. Every line must be a JSON object with a known "event"; a
// missing, unreadable, empty or malformed file is a ts::Error naming the file
// and, for a bad line, its number ("runs/m/metrics.jsonl:3: ...").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct MetricsBatch {
  int64_t epoch = 0, step = 0;
  double loss = 0;  // the epoch's mean so far
};

struct MetricsEpoch {
  int64_t epoch = 0, step = 0;
  double train_loss = 0, test_loss = 0;
  bool has_accuracy = false;
  double test_accuracy = 0;  // a fraction
};

struct Metrics {
  std::vector<MetricsBatch> batches;  // in the order logged
  std::vector<MetricsEpoch> epochs;
};

Metrics read_metrics(const std::string& path);

}  // namespace ts

#include "trainstep/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "train/event_file.h"
#include "trainstep/error.h"

namespace ts {

namespace {

const char* note_name(Note k) {
  switch (k) {
    case Note::Resumed: return "resumed";
    case Note::NoCheckpoint: return "no_checkpoint";
    case Note::Unchecked: return "unchecked";
    case Note::SkippedCheckpoint: return "skipped_checkpoint";
    case Note::SlowData: return "slow_data";
  }
  return "note";
}

// nlohmann writes NaN and inf as null already; said here so it is not a surprise.
nlohmann::ordered_json number(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); }

}  // namespace

MetricsLog::MetricsLog(const std::string& dir) {
  events_ = std::make_unique<EventFile>(dir);  // creates dir
  jsonl_path_ = (std::filesystem::path(dir) / "metrics.jsonl").string();
  jsonl_ = std::fopen(jsonl_path_.c_str(), "a");
  if (!jsonl_) fail(jsonl_path_ + ": cannot write the metrics log: " + std::strerror(errno));
}

const std::string& MetricsLog::event_path() const { return events_->path(); }

MetricsLog::~MetricsLog() {
  if (jsonl_) std::fclose(jsonl_);
}

void MetricsLog::write_line(const std::string& line) {
  if (std::fputs(line.c_str(), jsonl_) < 0 || std::fputc('\n', jsonl_) < 0 ||
      std::fflush(jsonl_) != 0)
    fail(jsonl_path_ + ": cannot write the metrics log: " + std::strerror(errno));
}

void MetricsLog::on_note(Note kind, const std::string& text) {
  write_line(nlohmann::ordered_json{{"event", "note"}, {"time", wall_time_now()}, {"kind", note_name(kind)},
                            {"text", text}}
                 .dump());
}

void MetricsLog::on_batch(const BatchProgress& p) {
  if (!batch_logged(p.batch, p.batches)) return;
  const double samples_per_s = p.timed_batches * p.batch_size / std::max(p.seconds, 1e-9);
  const double step_time =
      (p.seconds - last_seconds_) / std::max<int64_t>(1, p.timed_batches - last_timed_);
  last_timed_ = p.timed_batches;
  last_seconds_ = p.seconds;
  const double now = wall_time_now();
  events_->write(p.step,
                 {{"train/loss", static_cast<float>(p.loss)},
                  {"train/lr", static_cast<float>(p.lr)},
                  {"train/samples_per_s", static_cast<float>(samples_per_s)},
                  {"train/step_time_s", static_cast<float>(step_time)},
                  {"train/data_wait_s", static_cast<float>(p.data_wait)}},
                 now);
  events_->flush();
  write_line(nlohmann::ordered_json{{"event", "batch"},
                            {"time", now},
                            {"epoch", p.epoch},
                            {"batch", p.batch},
                            {"batches", p.batches},
                            {"step", p.step},
                            {"loss", number(p.loss)},
                            {"lr", number(p.lr)},
                            {"samples_per_s", number(samples_per_s)},
                            {"step_time_s", number(step_time)},
                            {"data_wait_s", number(p.data_wait)}}
                 .dump());
}

void MetricsLog::on_epoch(const EpochReport& r) {
  last_timed_ = last_seconds_ = 0;
  const double now = wall_time_now();
  Scalars values = {{"epoch/train_loss", static_cast<float>(r.train_loss)},
                    {"epoch/test_loss", static_cast<float>(r.test.loss)},
                    {"epoch/lr", static_cast<float>(r.lr)},
                    {"epoch/samples_per_s", static_cast<float>(r.samples_per_s)}};
  nlohmann::ordered_json j{{"event", "epoch"},
                   {"time", now},
                   {"epoch", r.epoch},
                   {"step", r.step},
                   {"lr", number(r.lr)},
                   {"train_loss", number(r.train_loss)},
                   {"test_loss", number(r.test.loss)},
                   {"samples_per_s", number(r.samples_per_s)},
                   {"seconds", number(r.seconds)},
                   {"data_wait_s", number(r.data_wait)},
                   {"skipped", r.skipped}};
  if (r.test.has_accuracy) {
    values.push_back({"epoch/test_accuracy", static_cast<float>(r.test.accuracy)});
    j["test_accuracy"] = number(r.test.accuracy);
  }
  if (r.test.has_perplexity) {
    values.push_back({"epoch/test_perplexity", static_cast<float>(r.test.perplexity)});
    j["test_perplexity"] = number(r.test.perplexity);
  }
  events_->write(r.step, values, now);
  events_->flush();
  write_line(j.dump());
}

}  // namespace ts

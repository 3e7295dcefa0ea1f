#include "progress.h"

#include <algorithm>
#include <cmath>

namespace tscli {

namespace {

// m:ss, or h:mm:ss from an hour on.
std::string duration_text(double s) {
  const long long t = std::isfinite(s) ? std::llround(std::max(s, 0.0)) : 0;
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%lld:%02lld", t / 60, t % 60);
  return b;
}

std::string accuracy_text(const ts::EvalResult& r) {
  char b[96];
  if (r.has_perplexity)
    std::snprintf(b, sizeof b, ", test perplexity %.2f, token accuracy %.2f%%", r.perplexity,
                  100 * r.accuracy);
  else
    std::snprintf(b, sizeof b, ", test accuracy %.2f%%", 100 * r.accuracy);
  return r.has_accuracy ? b : "";
}

// ", 12% waiting for data" where the loader held the steps up noticeably.
std::string wait_text(double wait, double seconds) {
  if (seconds <= 0 || wait < 0.05 * seconds) return "";
  char b[64];
  std::snprintf(b, sizeof b, ", %.0f%% waiting for data", 100 * wait / seconds);
  return b;
}

// The bar's text, without \r.
std::string progress_bar(const ts::BatchProgress& p) {
  constexpr int kWidth = 20;
  const int filled = p.batches ? static_cast<int>(kWidth * p.batch / p.batches) : 0;
  const double per_batch = p.timed_batches ? p.seconds / p.timed_batches : 0;
  const double samples_per_s = per_batch > 0 ? p.batch_size / per_batch : 0;
  char b[320];
  std::snprintf(b, sizeof b, "epoch %lld [%s%s] %lld/%lld loss %.4f, %.1f samples/s%s, ETA %s",
                (long long)p.epoch, std::string(filled, '#').c_str(),
                std::string(kWidth - filled, '.').c_str(), (long long)p.batch,
                (long long)p.batches, p.loss, samples_per_s,
                wait_text(p.data_wait, p.seconds).c_str(),
                duration_text((p.batches - p.batch) * per_batch).c_str());
  return b;
}

}  // namespace

TrainOutput::TrainOutput(bool tty) : tty_(tty) {}

TrainOutput::~TrainOutput() { end_line(); }

void TrainOutput::end_line() {
  if (!open_) return;
  std::fputc('\n', stderr);
  open_ = false;
  width_ = 0;
}

void TrainOutput::on_note(ts::Note kind, const std::string& text) {
  end_line();
  std::fprintf(stderr, "%s%s\n", kind == ts::Note::SkippedCheckpoint ? "warning: " : "",
               text.c_str());
}

void TrainOutput::draw(const ts::BatchProgress& p) {
  std::string line = progress_bar(p);
  const size_t n = line.size();
  if (n < width_) line.append(width_ - n, ' ');
  width_ = n;
  std::fprintf(stderr, "\r%s", line.c_str());
  open_ = true;
}

void TrainOutput::on_batch(const ts::BatchProgress& p) {
  const bool last = p.batch == p.batches;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && open_ && now - drawn_ < std::chrono::milliseconds(100)) return;
    drawn_ = now;
    draw(p);
    if (last) end_line();
  } else if (ts::batch_logged(p.batch, p.batches)) {
    std::fprintf(stderr, "epoch %lld [%lld/%lld] loss %.4f\n", (long long)p.epoch,
                 (long long)(p.batch * p.batch_size), (long long)(p.batches * p.batch_size),
                 p.loss);
  }
  std::fflush(stderr);
}

void TrainOutput::on_epoch(const ts::EpochReport& r) {
  end_line();
  const std::string skipped =
      r.skipped ? ", " + std::to_string(r.skipped) + " non-finite steps skipped so far" : "";
  std::printf("epoch %lld: lr %.6g, train loss %.4f, test loss %.4f%s, %.1f samples/s%s, %.1f s%s\n",
              (long long)r.epoch, r.lr, r.train_loss, r.test.loss, accuracy_text(r.test).c_str(),
              r.samples_per_s, wait_text(r.data_wait, r.seconds).c_str(), r.seconds,
              skipped.c_str());
  std::fflush(stdout);
}

}  // namespace tscli

#include "trainstep/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "io/checksum.h"
#include "runtime/formats.h"
#include "trainstep/error.h"

namespace ts {

namespace {

// Every key the schema owns; the rest of a file's metadata is `extra`.
const char* const kSchemaKeys[] = {
    "format", "format_version", "model", "step", "seed", "lr", "nonfinite_skips",
    "epoch", "data_position", "base_lr", "lr_schedule", "lr_schedule_unit", "accumulate",
    "epoch_loss_sum", "epoch_loss_count", "data_samples", "world_size"};

std::string exact(double v) {  // round-trips through std::stod
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Whole-string numbers (std::stoll alone accepts "12abc").
int64_t to_int(const std::string& v) {
  size_t pos = 0;
  const int64_t r = std::stoll(v, &pos);
  if (pos != v.size()) throw std::invalid_argument(v);
  return r;
}
double to_double(const std::string& v) {
  size_t pos = 0;
  const double r = std::stod(v, &pos);
  if (pos != v.size()) throw std::invalid_argument(v);
  return r;
}

}  // namespace

std::map<std::string, std::string> checkpoint_metadata(const CheckpointMeta& m) {
  std::map<std::string, std::string> r = m.extra;
  strip_checksums(r);
  r["format"] = kCheckpointFormat;
  r["format_version"] = kCheckpointVersion;
  r["model"] = m.model;
  r["step"] = std::to_string(m.step);
  r["seed"] = std::to_string(m.seed);
  r["lr"] = exact(m.lr);
  r["nonfinite_skips"] = std::to_string(m.nonfinite_skips);
  if (m.run) {
    const RunPosition& p = *m.run;
    r["epoch"] = std::to_string(p.epoch);
    r["data_position"] = std::to_string(p.batch);
    if (p.samples >= 0) r["data_samples"] = std::to_string(p.samples);
    r["world_size"] = std::to_string(p.world_size);
    r["base_lr"] = exact(p.base_lr);
    r["lr_schedule"] = p.lr_schedule;
    r["lr_schedule_unit"] = p.lr_schedule_unit;
    r["accumulate"] = std::to_string(p.accumulate);
    r["epoch_loss_sum"] = exact(p.epoch_loss_sum);
    r["epoch_loss_count"] = std::to_string(p.epoch_loss_count);
  }
  return r;
}

CheckpointMeta parse_checkpoint_metadata(const std::map<std::string, std::string>& meta,
                                         const std::string& path) {
  auto get = [&](const char* k) -> const std::string& {
    auto it = meta.find(k);
    if (it == meta.end()) fail(path + ": checkpoint metadata lacks '" + k + "'");
    return it->second;
  };
  auto opt = [&](const char* k, const char* dflt) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string(dflt) : it->second;
  };
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kCheckpointFormat)
    fail(path + ": not a trainstep checkpoint");
  if (opt("format_version", "") != kCheckpointVersion)
    fail(path + ": unsupported checkpoint version '" + opt("format_version", "") + "'");
  CheckpointMeta m;
  m.model = opt("model", "");
  m.checksummed = has_checksums(meta);
  try {
    m.step = to_int(get("step"));
    m.seed = to_int(get("seed"));
    m.lr = to_double(get("lr"));
    m.nonfinite_skips = to_int(opt("nonfinite_skips", "0"));
  } catch (const std::logic_error&) {
    fail(path + ": checkpoint metadata has a malformed step, seed, lr or nonfinite_skips");
  }
  if (m.step < 0 || m.nonfinite_skips < 0 || m.nonfinite_skips > m.step)
    fail(path + ": checkpoint metadata has a negative step or more skipped steps than steps");

  // Checkpoints from before mid-epoch resumes, per-step schedules and
  // accumulation lack those keys; the defaults are what those runs did.
  if (meta.count("epoch")) {
    RunPosition r;
    try {
      r.epoch = to_int(get("epoch"));
      r.batch = to_int(opt("data_position", "0"));
      r.base_lr = to_double(get("base_lr"));
      r.epoch_loss_sum = to_double(opt("epoch_loss_sum", "0"));
      r.epoch_loss_count = to_int(opt("epoch_loss_count", "0"));
      r.accumulate = to_int(opt("accumulate", "1"));
      r.samples = to_int(opt("data_samples", "-1"));
      r.world_size = to_int(opt("world_size", "1"));
    } catch (const std::logic_error&) {
      fail(path + ": checkpoint metadata has a malformed epoch, data_position, base_lr, epoch "
                  "loss, accumulate, data_samples or world_size");
    }
    if (r.accumulate < 1)
      fail(path + ": checkpoint metadata has accumulate " + std::to_string(r.accumulate) +
           " (must be at least 1)");
    if (r.epoch < 0 || r.batch < 0 || r.epoch_loss_count < 0 || r.epoch_loss_count > r.batch)
      fail(path + ": checkpoint metadata has a negative epoch or data position");
    if (r.samples < -1 || r.world_size < 1 || (r.samples >= 0 && r.samples < r.batch))
      fail(path + ": checkpoint metadata has a bad data_samples or world_size");
    if (!std::isfinite(r.base_lr)) fail(path + ": checkpoint metadata has a non-finite base_lr");
    r.lr_schedule = get("lr_schedule");
    r.lr_schedule_unit = opt("lr_schedule_unit", "epoch");
    if (r.lr_schedule_unit != "epoch" && r.lr_schedule_unit != "step")
      fail(path + ": checkpoint has a bad LR schedule unit '" + r.lr_schedule_unit + "'");
    m.run = r;
  }
  m.extra = meta;
  for (const char* k : kSchemaKeys) m.extra.erase(k);
  strip_checksums(m.extra);
  return m;
}

}  // namespace ts

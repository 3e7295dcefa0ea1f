#include "train/metrics_read.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.h"
#include "trainstep/error.h"

namespace ts {

namespace {

using json = nlohmann::json;

struct Line {
  const std::string& path;
  int number;
  const json& j;

  [[noreturn]] void fail_at(const std::string& msg) const {
    fail(path + ":" + std::to_string(number) + ": " + msg);
  }
  int64_t integer(const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer())
      fail_at(std::string("no integer \"") + key + "\"");
    return it->get<int64_t>();
  }
  // Null (how the log writes a non-finite value) reads as NaN.
  double real(const char* key) const {
    auto it = j.find(key);
    if (it != j.end() && it->is_null()) return NAN;
    if (it == j.end() || !it->is_number()) fail_at(std::string("no number \"") + key + "\"");
    return it->get<double>();
  }
};

}  // namespace

Metrics read_metrics(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail(path + ": is a folder, not a metrics log");
  std::istringstream in(read_file(path));
  Metrics m;
  std::string text;
  int number = 0, events = 0;
  while (std::getline(in, text)) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    const Line line{path, number, j};
    if (!j.is_object()) line.fail_at("not a JSON object (a line cut short?)");
    auto ev = j.find("event");
    if (ev == j.end() || !ev->is_string()) line.fail_at("no \"event\" string");
    const std::string kind = ev->get<std::string>();
    if (kind == "batch") {
      m.batches.push_back({line.integer("epoch"), line.integer("step"), line.real("loss")});
    } else if (kind == "epoch") {
      MetricsEpoch e{line.integer("epoch"), line.integer("step"), line.real("train_loss"),
                     line.real("test_loss")};
      if (j.contains("test_accuracy")) {
        e.has_accuracy = true;
        e.test_accuracy = line.real("test_accuracy");
      }
      m.epochs.push_back(e);
    } else if (kind != "note") {
      line.fail_at("unknown event \"" + kind + "\"");
    }
    ++events;
  }
  if (m.batches.empty() && m.epochs.empty())
    fail(path + (events ? ": no batch or epoch lines to plot" : ": empty, nothing to plot"));
  return m;
}

}  // namespace ts

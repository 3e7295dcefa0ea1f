// ts::verify (trainstep/verify.h) on the tiny hand-built artifact with a
// golden trace written here by hand: what it reports, that a mismatch is a
// report and not an error, and what is an error. (Real models against
// eager PyTorch: `trainstep verify` in the Python tests.)
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"
#include "tiny_artifact.h"
#include "trainstep/verify.h"

using ts::DType;
using ts::HostTensor;
using ts_test::error_of;
using ts_test::json;
using ts_test::make_temp_dir;

namespace {

// The tiny artifact (y = x @ w, loss = mean(y), w' = w - lr) and its golden
// trace, worked out here: two steps at lr 0.5 on x = ones, then eval.
// `edit` may change the golden tensors before they are written; `traced`
// adds the eager values of step 0's nodes, as `export --trace-values` does.
using Golden = std::map<std::string, HostTensor>;
std::string tiny_with_golden(const std::function<void(Golden&)>& edit = nullptr,
                             bool traced = false) {
  const std::string plain = ts_test::write_tiny_artifact(make_temp_dir(), "w", false, nullptr,
                                                         [](json& p) {
    p["golden"] = {{"steps", 2}, {"seed", 0}, {"offset", 0}, {"lr", 0.5}};
  });
  ts::SafeTensors file = ts::read_safetensors(plain);
  Golden t;
  auto tensor = [&](const std::string& name, DType dt, ts::Shape shape) -> HostTensor& {
    return t[name] = HostTensor(dt, shape);
  };
  float w[12];
  for (int i = 0; i < 12; ++i) w[i] = 0.1f * i;
  // x @ w with x all ones: each row holds w's column sums.
  auto mm = [&](HostTensor& out) {
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 3; ++j) {
        float s = 0;
        for (int i = 0; i < 4; ++i) s += w[i * 3 + j];
        out.view.as<float>()[r * 3 + j] = s;
      }
  };
  auto mean = [&] {
    float s = 0;
    for (float v : w) s += v;
    return 2 * s / 6;
  };
  HostTensor& loss = tensor("golden/loss", DType::F32, {2});
  for (int k = 0; k < 2; ++k) {
    const std::string step = "golden/step" + std::to_string(k) + "/";
    HostTensor& x = tensor(step + "input0", DType::F32, {2, 4});
    for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 1;
    tensor(step + "target", DType::I64, {2});
    if (k == 0 && traced) {
      mm(tensor("trace/train_step/mm", DType::F32, {2, 3}));
      tensor("trace/train_step/mean", DType::F32, {}).view.as<float>()[0] = mean();
    }
    loss.view.as<float>()[k] = mean();
    for (float& v : w) v -= 0.5f;
    if (k == 0) std::copy(w, w + 12, tensor("golden/after0/w", DType::F32, {4, 3}).view.as<float>());
    if (k == 0 && traced)
      std::copy(w, w + 12, tensor("trace/train_step/w2", DType::F32, {4, 3}).view.as<float>());
  }
  std::copy(w, w + 12, tensor("golden/final/w", DType::F32, {4, 3}).view.as<float>());
  HostTensor& out = tensor("golden/eval/output0", DType::F32, {2, 3});
  mm(out);
  HostTensor& sample = tensor("golden/eval/sample_loss", DType::F32, {2});
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) sample.view.as<float>()[r] += out.view.as<float>()[r * 3 + j];
  if (edit) edit(t);

  ts::NamedTensors all;
  for (const auto& [name, v] : file.tensors) all.push_back({name, &v.view});
  for (const auto& [name, v] : t) all.push_back({name, &v.view});
  const std::string path = plain + ".golden.tstep";
  ts::write_safetensors(path, file.metadata, all);
  return path;
}

std::vector<std::string> names(const std::vector<ts::VerifyCheck>& checks) {
  std::vector<std::string> n;
  for (const auto& c : checks) n.push_back(c.name);
  return n;
}

// Records what the observer is told, in order.
struct Log : ts::VerifyObserver {
  std::vector<std::string> events;
  void on_open(const ts::VerifyReport& r) override { events.push_back("open " + r.device); }
  void on_start(const ts::VerifyReport& r) override { events.push_back("start"); }
  void on_trace_mismatch(const ts::TraceMismatch& m) override { events.push_back("node " + m.node); }
  void on_trace(const ts::TraceReport& t) override { events.push_back("trace"); }
  void on_check(const ts::VerifyCheck& c) override { events.push_back(c.name); }
};

}  // namespace

TEST(Verify, PassesOnAMatchingGoldenTrace) {
  Log log;
  const ts::VerifyReport r = ts::verify(tiny_with_golden(), {}, &log);
  EXPECT_TRUE(r.ok()) << r.failure;
  EXPECT_TRUE(r.checksummed);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_FALSE(r.trace);
  // No calibration in this golden trace: the default for every value.
  EXPECT_NE(r.tolerance.find("tolerance 1.0e-04 for every value (the default"), std::string::npos)
      << r.tolerance;
  const std::vector<std::string> want = {"loss[step 0]", "update w", "loss[step 1]", "state w",
                                         "eval output", "eval sample_loss"};
  EXPECT_EQ(names(r.checks), want);
  for (const auto& c : r.checks) {
    EXPECT_TRUE(c.ok) << c.name;
    EXPECT_EQ(c.tol, 1e-4) << c.name;
    EXPECT_LE(c.of_scale, 1e-6) << c.name;
  }
  EXPECT_EQ(r.checks[1].key, "delta/w");
  std::vector<std::string> events = {"open cpu", "start"};
  events.insert(events.end(), want.begin(), want.end());
  EXPECT_EQ(log.events, events);
}

TEST(Verify, AMismatchIsReportedNotThrown) {
  const ts::VerifyReport r = ts::verify(tiny_with_golden([](Golden& t) {
    t["golden/final/w"].view.as<float>()[5] += 0.5f;
  }));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failure, "state w");
  for (const auto& c : r.checks) EXPECT_EQ(c.ok, c.name != "state w") << c.name;
  const ts::VerifyCheck& bad = r.checks[3];
  ASSERT_EQ(bad.name, "state w");
  EXPECT_NEAR(bad.max_abs, 0.5, 1e-6);
  EXPECT_NEAR(bad.of_scale, bad.max_abs / bad.scale, 1e-12);
  EXPECT_GT(bad.of_scale, bad.tol);
  EXPECT_FALSE(bad.nonfinite);
}

TEST(Verify, OneToleranceForEveryValue) {
  const std::string path = tiny_with_golden([](Golden& t) {
    t["golden/loss"].view.as<float>()[1] *= 1.1f;  // 1% of the series' scale
  });
  EXPECT_EQ(ts::verify(path).failure, "loss[step 1]");
  ts::VerifyOptions o;
  o.tol = 0.5;
  const ts::VerifyReport r = ts::verify(path, o);
  EXPECT_TRUE(r.ok()) << r.failure;
  EXPECT_EQ(r.tolerance, "tolerance 5.0e-01 for every value (--tol)");
  for (const auto& c : r.checks) EXPECT_EQ(c.tol, 0.5) << c.name;
}

TEST(Verify, TraceNamesTheFirstDivergingNode) {
  ts::VerifyOptions o;
  o.trace = true;
  const ts::VerifyReport ok = ts::verify(tiny_with_golden(nullptr, true), o);
  ASSERT_TRUE(ok.trace);
  EXPECT_TRUE(ok.ok()) << ok.failure;
  EXPECT_EQ(ok.trace->compared, 3);
  EXPECT_EQ(ok.trace->unrecorded, 0);
  EXPECT_TRUE(ok.trace->mismatches.empty());

  Log log;
  const ts::VerifyReport r = ts::verify(tiny_with_golden([](Golden& t) {
    t["trace/train_step/mean"].view.as<float>()[0] += 1;
  }, true), o, &log);
  ASSERT_TRUE(r.trace);
  ASSERT_EQ(r.trace->mismatches.size(), 1u);
  const ts::TraceMismatch& m = r.trace->mismatches[0];
  EXPECT_EQ(m.node, "mean");
  EXPECT_EQ(m.op, "aten.mean.default");
  EXPECT_EQ(m.text.rfind("node 'mean' (aten.mean.default) value 'mean': max_abs ", 0), 0u) << m.text;
  // The steps themselves still match: the trace's failure comes first.
  EXPECT_EQ(r.failure, "trace: " + m.text);
  for (const auto& c : r.checks) EXPECT_TRUE(c.ok) << c.name;
  ASSERT_GE(log.events.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(log.events.begin() + 1, log.events.begin() + 5),
            (std::vector<std::string>{"start", "node mean", "trace", "loss[step 0]"}));
}

TEST(Verify, WhatCannotBeComparedIsAnError) {
  const std::string plain = ts_test::write_tiny_artifact(make_temp_dir());
  EXPECT_EQ(error_of([&] { ts::verify(plain); }), plain + ": the artifact has no golden trace");
  const std::string golden = tiny_with_golden();
  ts::VerifyOptions o;
  o.trace = true;
  EXPECT_EQ(error_of([&] { ts::verify(golden, o); }),
            golden + ": the artifact has no recorded trace (export it with --trace-values)");
  const std::string wrong = tiny_with_golden([](Golden& t) {
    t["golden/final/w"] = HostTensor(DType::F32, {3, 4});
  });
  EXPECT_EQ(error_of([&] { ts::verify(wrong); }),
            "state w: got float32[4, 3], golden is float32[3, 4]");
}

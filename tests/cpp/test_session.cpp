// The public Session API on a tiny hand-built artifact: batch checks,
// state access, checkpoints. (Numerics against PyTorch are covered by the
// Python parity tests; this checks the API's contracts and errors.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_util.h"
#include "tiny_artifact.h"
#include "trainstep/error.h"
#include "trainstep/session.h"

using ts::DType;
using ts::HostTensor;
using json = nlohmann::json;

using ts_test::error_of;
using ts_test::make_temp_dir;
using ts_test::node;
using ts_test::port;
using ts_test::write_tiny_artifact;

TEST(Session, RunsAStepAndUpdatesState) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir()));
  EXPECT_EQ(s->batch_size(), 2);
  EXPECT_DOUBLE_EQ(s->lr(), 0.5);
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 1.0f;
  // mean over (x @ w) with x all ones: sum of w's column sums / 3, per row.
  float expect = 0;
  for (int i = 0; i < 12; ++i) expect += s->state("w").as<float>()[i];
  expect /= 3;
  EXPECT_FLOAT_EQ(s->train_step({x.view}, y.view), expect);
  EXPECT_EQ(s->step(), 1);
  EXPECT_FLOAT_EQ(s->state("w").as<float>()[1], 0.1f - 0.5f);
}

// A target structure of two tensors: ports bound by their index (the
// float one is listed first in the artifact), each checked by name.
TEST(Session, TakesSeveralTargetTensorsByIndex) {
  auto two_targets = [](json& program) {
    json& train = program["functions"]["train_step"];
    train["inputs"].insert(train["inputs"].begin() + 4,
                           port("target/weight", "target", "float32", {2}, {{"index", 1}}));
    train["inputs"].back()["index"] = 0;
    train["inputs"].back()["name"] = "target/label";
    train["nodes"].push_back(node("wmean", "aten.mean.default", {"target/weight"},
                                  {{"dtype", nullptr}}, "float32", json::array()));
    train["nodes"].push_back(node("total", "aten.add.Tensor", {"mean", "wmean"}, {{"alpha", 1}},
                                  "float32", json::array()));
    train["outputs"][0]["value"] = "total";
  };
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir(), "w", false, nullptr, two_targets));
  const std::vector<ts::TensorType> types = s->target_types();
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[0].str(), "int64[2]");
  EXPECT_EQ(types[1].str(), "float32[2]");
  HostTensor x(DType::F32, {2, 4}), label(DType::I64, {2}), weight(DType::F32, {2});
  for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 1.0f;
  weight.view.as<float>()[0] = 3.0f;
  weight.view.as<float>()[1] = 5.0f;
  float expect = 4.0f;  // mean of the weights, plus mean(x @ w) as in the test above
  for (int i = 0; i < 12; ++i) expect += s->state("w").as<float>()[i] / 3;
  EXPECT_EQ(error_of([&] { s->train_step({x.view}, label.view); }),
            "train_step: expected 2 target(s), got 1");
  EXPECT_EQ(error_of([&] { s->train_step({x.view}, {weight.view, label.view}); }),
            "train_step: target 0 (target/label) is float32[2], expected int64[2] (the "
            "artifact's batch)");
  EXPECT_EQ(s->step(), 0);
  EXPECT_FLOAT_EQ(s->train_step({x.view}, {label.view, weight.view}), expect);
}

TEST(Session, RejectsABatchOfTheWrongShape) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir()));
  HostTensor x(DType::F32, {3, 4}), y(DType::I64, {2}), yf(DType::F32, {2});
  EXPECT_EQ(error_of([&] { s->train_step({x.view}, y.view); }),
            "train_step: input 0 (input0) is float32[3, 4], expected float32[2, 4] (the artifact's batch)");
  HostTensor x2(DType::F32, {2, 4});
  EXPECT_EQ(error_of([&] { s->train_step({x2.view}, yf.view); }),
            "train_step: target 0 (target) is float32[2], expected int64[2] (the artifact's batch)");
  EXPECT_EQ(error_of([&] { s->eval_step({}, y.view); }),
            "eval_step: expected 1 model input(s), got 0");
  EXPECT_EQ(s->step(), 0);  // nothing ran
}

TEST(Session, StateByName) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir()));
  EXPECT_EQ(s->state_names(), std::vector<std::string>{"w"});
  HostTensor bad(DType::F32, {3, 4});
  EXPECT_EQ(error_of([&] { s->set_state("w", bad.view); }),
            "state 'w' is float32[4, 3], got float32[3, 4]");
  EXPECT_EQ(error_of([&] { s->state("nope"); }), "no state tensor named 'nope'");
}

TEST(Session, OpensFromMemoryAsFromTheFile) {
  std::string dir = make_temp_dir();
  const std::string path = write_tiny_artifact(dir);
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto from_file = ts::Session::open(path);
  auto from_memory = ts::Session::open_memory(bytes, "tiny (in memory)");
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int64_t i = 0; i < 8; ++i) x.view.as<float>()[i] = 0.25f * float(i) - 1.0f;
  y.view.as<int64_t>()[1] = 2;
  EXPECT_EQ(from_file->train_step({x.view}, y.view), from_memory->train_step({x.view}, y.view));
  EXPECT_EQ(0, std::memcmp(from_file->state("w").data, from_memory->state("w").data,
                           from_file->state("w").nbytes()));
  std::string bad = bytes;
  bad[bad.size() - 1] ^= 1;  // a flipped bit in the last tensor's bytes
  const std::string e = error_of([&] { ts::Session::open_memory(bad, "tiny (in memory)"); });
  EXPECT_EQ(e.rfind("tiny (in memory): ", 0), 0u) << e;
}

// on_step: one report per optimizer step, carrying what the step returned.
TEST(Session, ReportsEachOptimizerStep) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir(), "w", true));
  std::vector<ts::StepMetrics> seen;
  s->on_step([&](const ts::StepMetrics& m) { seen.push_back(m); });
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int64_t i = 0; i < 8; ++i) x.view.as<float>()[i] = 0.5f * float(i);
  s->set_lr(0.25);
  const float loss = s->train_step({x.view}, y.view);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].step, 1);
  EXPECT_EQ(seen[0].lr, 0.25);
  EXPECT_EQ(seen[0].loss, loss);
  EXPECT_GE(seen[0].seconds, 0.0);
  EXPECT_FALSE(seen[0].skipped);
  s->grad_step({x.view}, y.view);
  const float last = s->grad_step({x.view}, y.view);
  EXPECT_EQ(seen.size(), 1u);  // micro-batches are not optimizer steps
  s->apply_grads();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].step, 2);
  EXPECT_EQ(seen[1].loss, last);
  s->on_step(nullptr);
  s->train_step({x.view}, y.view);
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Session, CheckpointRoundTripAndWrongModel) {
  std::string dir = make_temp_dir();
  auto s = ts::Session::open(write_tiny_artifact(dir));
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  s->set_seed(42);
  s->train_step({x.view}, y.view);
  ts::RunPosition run;
  run.epoch = 3;
  run.lr_schedule_unit = "step";
  s->save_checkpoint(dir + "/a.ckpt", run, {{"note", "mine"}});
  auto s2 = ts::Session::open(write_tiny_artifact(dir));
  ts::CheckpointMeta meta = s2->load_checkpoint(dir + "/a.ckpt");
  ASSERT_TRUE(meta.run.has_value());
  EXPECT_EQ(meta.run->epoch, 3);
  EXPECT_EQ(meta.run->lr_schedule_unit, "step");
  EXPECT_EQ(meta.extra, (std::map<std::string, std::string>{{"note", "mine"}}));
  EXPECT_EQ(meta.step, 1);
  EXPECT_TRUE(meta.checksummed);
  EXPECT_EQ(s2->step(), 1);
  EXPECT_EQ(s2->seed(), 42);
  EXPECT_EQ(0, std::memcmp(s2->state("w").data, s->state("w").data, s->state("w").nbytes()));

  auto other = ts::Session::open(write_tiny_artifact(dir, "v"));
  EXPECT_EQ(error_of([&] { other->load_checkpoint(dir + "/a.ckpt"); }),
            dir + "/a.ckpt: checkpoint is for a different model: it has no tensor 'v' "
                  "(model 'tiny', this artifact is 'tiny')");
}

// A step whose new state is another state's old value (new a = old b, new
// b = old a): copying back one by one would read an overwritten buffer.
TEST(Session, SwappedStateIsCopiedBackCorrectly) {
  std::string dir = make_temp_dir();
  auto st = [](const char* n) {
    return port((std::string("state/") + n).c_str(), "state", "float32", {3}, {{"state", n}});
  };
  json common_in = {port("input0", "input", "float32", {2, 3}, {{"index", 0}}),
                    port("target", "target", "int64", {2})};
  json train = {
      {"inputs", {st("a"), st("b"), port("lr", "lr", "float32", json::array()),
                  port("rng_seed", "rng_seed", "int64", json::array()),
                  port("rng_offset", "rng_offset", "int64", json::array()), common_in[0], common_in[1]}},
      {"nodes", {node("loss", "aten.mean.default", {"input0"}, {{"dtype", nullptr}}, "float32",
                      json::array())}},
      {"outputs",
       {{{"value", "loss"}, {"role", "loss"}, {"dtype", "float32"}, {"shape", json::array()}},
        {{"value", "state/b"}, {"role", "state"}, {"state", "a"}, {"dtype", "float32"}, {"shape", {3}}},
        {{"value", "state/a"}, {"role", "state"}, {"state", "b"}, {"dtype", "float32"}, {"shape", {3}}}}}};
  json eval = {
      {"inputs", {st("a"), st("b"), common_in[0], common_in[1]}},
      {"nodes", {node("sl", "aten.sum.dim_IntList", {"input0"},
                      {{"dim", {1}}, {"keepdim", false}, {"dtype", nullptr}}, "float32", {2})}},
      {"outputs",
       {{{"value", "input0"}, {"role", "output"}, {"dtype", "float32"}, {"shape", {2, 3}}},
        {{"value", "sl"}, {"role", "sample_loss"}, {"dtype", "float32"}, {"shape", {2}}}}}};
  json state = json::array();
  for (const char* n : {"a", "b"})
    state.push_back({{"name", n}, {"kind", "param"}, {"dtype", "float32"}, {"shape", {3}}});
  json program = {{"format", "trainstep"}, {"version", 1}, {"name", "swap"}, {"batch_size", 2},
                  {"optimizer", {{"lr", 0.1}}}, {"state", state},
                  {"functions", {{"train_step", train}, {"eval_step", eval}}}};
  HostTensor a(DType::F32, {3}), b(DType::F32, {3});
  for (int i = 0; i < 3; ++i) {
    a.view.as<float>()[i] = float(i);
    b.view.as<float>()[i] = float(10 + i);
  }
  std::string path = dir + "/swap.tstep";
  ts::write_safetensors(path, {{"format", "trainstep"}, {"format_version", "1"},
                               {"program", program.dump()}},
                        {{"state/a", &a.view}, {"state/b", &b.view}});
  auto s = ts::Session::open(path);
  HostTensor x(DType::F32, {2, 3}), y(DType::I64, {2});
  s->train_step({x.view}, y.view);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s->state("a").as<float>()[i], float(10 + i));
    EXPECT_EQ(s->state("b").as<float>()[i], float(i));
  }
}

TEST(Session, GradStepsAccumulateAndApplyAverages) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir(), "w", true));
  ASSERT_TRUE(s->has_grad_functions());
  EXPECT_EQ(s->grad_names(), std::vector<std::string>{"w"});
  std::vector<float> w0(s->state("w").as<float>(), s->state("w").as<float>() + 12);
  HostTensor x1(DType::F32, {2, 4}), x2(DType::F32, {2, 4}), y(DType::I64, {2});
  for (int i = 0; i < 8; ++i) {
    x1.view.as<float>()[i] = 1.0f;
    x2.view.as<float>()[i] = 0.5f * i;
  }
  float l1 = s->grad_step({x1.view}, y.view);
  float l2 = s->grad_step({x2.view}, y.view);
  EXPECT_EQ(s->pending_grad_steps(), 2);
  EXPECT_EQ(s->step(), 0);  // no update yet
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(s->state("w").as<float>()[i], w0[i]);
    EXPECT_FLOAT_EQ(s->grad("w").as<float>()[i], w0[i] * l1 + w0[i] * l2);  // running sum
  }
  s->set_lr(0.5);
  s->apply_grads();
  EXPECT_EQ(s->step(), 1);
  EXPECT_EQ(s->pending_grad_steps(), 0);
  for (int i = 0; i < 12; ++i) {
    const float avg = (w0[i] * l1 + w0[i] * l2) * 0.5f;
    EXPECT_FLOAT_EQ(s->grad("w").as<float>()[i], avg);  // what the update used
    EXPECT_FLOAT_EQ(s->state("w").as<float>()[i], w0[i] - 0.5f * avg);
  }
  EXPECT_EQ(error_of([&] { s->apply_grads(); }), "apply_grads: no grad_step since the last update");
  EXPECT_EQ(error_of([&] { s->grad("nope"); }), "no gradient for 'nope': no such parameter");
  EXPECT_EQ(error_of([&] { s->set_accumulation(0); }),
            "gradient accumulation must be at least 1 micro-batch, got 0");
}

TEST(Session, GradsNeedGradStepsAskedForOrExported) {
  std::string path = write_tiny_artifact(make_temp_dir());
  auto s = ts::Session::open(path);
  EXPECT_FALSE(s->has_grad_functions());
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  const std::string how =
      " needs grad_step and apply_step: open the session with SessionOptions::grad_steps "
      "(train and bench --accumulate do), or export the artifact with --grads";
  EXPECT_EQ(error_of([&] { s->grad_step({x.view}, y.view); }),
            path + ": grad_step (gradient accumulation)" + how);
  EXPECT_EQ(error_of([&] { s->grad("w"); }), path + ": gradients by name (Session::grad)" + how);
  // Asked for, they are cut from train_step at the gradients it names;
  // this hand-made one names none.
  ts::SessionOptions o;
  o.grad_steps = true;
  auto asked = ts::Session::open(path, o);
  EXPECT_FALSE(asked->has_grad_functions());
  EXPECT_EQ(error_of([&] { asked->grad_step({x.view}, y.view); }),
            path + ": grad_step (gradient accumulation) needs grad_step and apply_step, and the "
                   "artifact names no gradients in train_step to cut them from (it predates "
                   "trainstep doing so): export it again, or export it with --grads");
}

TEST(Session, CheckpointsCarryTiedWeightNames) {
  std::string dir = make_temp_dir();
  auto s = ts::Session::open(write_tiny_artifact(dir, "w", false, "w_tied"));
  HostTensor x(DType::F32, {2, 4}), y(DType::I64, {2});
  s->train_step({x.view}, y.view);
  s->save_checkpoint(dir + "/t.ckpt");
  ts::SafeTensors ck = ts::read_safetensors(dir + "/t.ckpt");
  ASSERT_NE(ck.find("w_tied"), nullptr);  // model.load_state_dict needs both names
  EXPECT_EQ(0, std::memcmp(ck.find("w_tied")->view.data, s->state("w").data, 48));
  auto s2 = ts::Session::open(write_tiny_artifact(dir, "w", false, "w_tied"));
  s2->load_checkpoint(dir + "/t.ckpt");
  EXPECT_EQ(0, std::memcmp(s2->state("w").data, s->state("w").data, 48));
  // Without the alias in the artifact, the extra name is a different model.
  auto plain = ts::Session::open(write_tiny_artifact(dir));
  EXPECT_EQ(error_of([&] { plain->load_checkpoint(dir + "/t.ckpt"); }),
            dir + "/t.ckpt: checkpoint is for a different model: unexpected tensor 'w_tied'");
}

// Reliability contracts on the tiny hand-built artifact: non-finite steps
// (stop names the tensor, skip keeps the old state), memory limits checked
// before allocation, shape limits of the program parser, the checkpoint
// folder, resume metadata and the stop signals.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "ir/program.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "runtime/nonfinite.h"
#include "test_util.h"
#include "tiny_artifact.h"
#include "train/checkpoints.h"
#include "trainstep/train.h"
#include "trainstep/train.h"
#include "trainstep/error.h"
#include "trainstep/session.h"

using ts::DType;
using ts::HostTensor;
using ts_test::error_of;
using ts_test::json;
using ts_test::make_temp_dir;
using ts_test::write_tiny_artifact;

namespace {

struct Batch {
  HostTensor x{DType::F32, {2, 4}}, y{DType::I64, {2}};
  Batch() {
    for (int i = 0; i < 8; ++i) x.view.as<float>()[i] = 1.0f;
  }
};

std::vector<float> state_of(const ts::Session& s) {
  const float* w = s.state("w").as<float>();
  return std::vector<float>(w, w + 12);
}

ts::SessionOptions with(ts::NonFinite mode) {
  ts::SessionOptions o;
  o.on_nonfinite = mode;
  return o;
}

}  // namespace

// w' = w - lr: an infinite LR makes every element of the new w -inf.
TEST(NonFinite, StopNamesTheStepAndTheFirstBadTensor) {
  auto s = ts::Session::open(write_tiny_artifact(make_temp_dir()), with(ts::NonFinite::Stop));
  Batch b;
  s->train_step({b.x.view}, b.y.view);
  s->set_lr(INFINITY);
  EXPECT_EQ(error_of([&] { s->train_step({b.x.view}, b.y.view); }),
            "step 1: the new value of 'w' (param) is -inf at element 0 "
            "(--on-nonfinite skip drops such steps instead)");
  // The loss is checked first.
  s->set_lr(0.5);
  s->set_step(1);
  b.x.view.as<float>()[0] = NAN;
  EXPECT_EQ(error_of([&] { s->train_step({b.x.view}, b.y.view); }),
            "step 1: the loss is nan (--on-nonfinite skip drops such steps instead)");
}

TEST(NonFinite, SkipKeepsTheOldStateAndCounts) {
  const std::string dir = make_temp_dir();
  auto s = ts::Session::open(write_tiny_artifact(dir), with(ts::NonFinite::Skip));
  Batch b;
  const std::vector<float> w0 = state_of(*s);
  s->set_lr(INFINITY);
  s->train_step({b.x.view}, b.y.view);
  EXPECT_TRUE(s->last_step_skipped());
  EXPECT_EQ(s->skipped_steps(), 1);
  EXPECT_EQ(s->step(), 1);  // the batch was consumed
  EXPECT_EQ(state_of(*s), w0);
  s->set_lr(0.5);
  s->train_step({b.x.view}, b.y.view);
  EXPECT_FALSE(s->last_step_skipped());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(state_of(*s)[i], w0[i] - 0.5f);
  // The count survives a checkpoint.
  s->save_checkpoint(dir + "/c.ckpt");
  auto s2 = ts::Session::open(write_tiny_artifact(dir), with(ts::NonFinite::Skip));
  s2->load_checkpoint(dir + "/c.ckpt");
  EXPECT_EQ(s2->skipped_steps(), 1);
  EXPECT_EQ(s2->step(), 2);
}

// Skip mode trades the in-place update for a copy; the numbers are the same.
TEST(NonFinite, SkipModeGivesTheSameBitsWhenAllIsFinite) {
  const std::string path = write_tiny_artifact(make_temp_dir());
  auto a = ts::Session::open(path, with(ts::NonFinite::Stop));
  auto b = ts::Session::open(path, with(ts::NonFinite::Skip));
  Batch x;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a->train_step({x.x.view}, x.y.view), b->train_step({x.x.view}, x.y.view));
  }
  EXPECT_EQ(state_of(*a), state_of(*b));
  EXPECT_EQ(a->train_executor().plan().donated.size(), 1u);
  EXPECT_EQ(b->train_executor().plan().donated.size(), 0u);
}

TEST(MemoryLimit, BoundsStateAndArenasAndNamesTheSizeNeeded) {
  const std::string path = write_tiny_artifact(make_temp_dir());
  const size_t need = ts::Session::open(path)->memory_bytes();
  ts::SessionOptions o;
  o.max_memory = need;
  EXPECT_EQ(ts::Session::open(path, o)->memory_bytes(), need);
  o.max_memory = need - 1;
  std::string e = error_of([&] { ts::Session::open(path, o); });
  EXPECT_NE(e.find(path + ": the session needs " + ts::bytes_str(need) + " (" +
                   std::to_string(need) + " bytes: state 48 bytes, train_step arena "),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("more than the memory limit of " + ts::bytes_str(need - 1)), std::string::npos) << e;
  o.max_memory = 47;  // less than the state (12 floats)
  EXPECT_EQ(error_of([&] { ts::Session::open(path, o); }),
            path + ": the state needs 48 bytes, more than the memory limit of 47 bytes (47 bytes, "
                   "--max-memory)");
}

// 10^12 elements (4 TB of float32) in one node's output: refused before any
// allocation (an attempt would fail or exhaust memory, not give this error).
TEST(MemoryLimit, AnAbsurdShapeIsRefusedBeforeAllocation) {
  const std::string path = write_tiny_artifact(make_temp_dir(), "w", false, nullptr, [](json& p) {
    p["functions"]["train_step"]["nodes"].push_back(ts_test::node(
        "huge", "aten.new_zeros.default", {"input0"},
        {{"size", {1000000, 1000000}}, {"dtype", nullptr}, {"layout", nullptr},
         {"device", nullptr}, {"pin_memory", nullptr}},
        "float32", {1000000, 1000000}));
  });
  std::string e = error_of([&] { ts::Session::open(path); });
  EXPECT_EQ(e.rfind(path + ": function 'train_step': value 'huge' (node 'huge', aten.new_zeros.default) "
                           "is float32[1000000, 1000000], " + ts::bytes_str(4000000000000ull) +
                           ", more than the memory limit of ", 0),
            0u)
      << e;
}

TEST(ProgramLimits, RankNegativeDimsAndElementCount) {
  auto parse_state_shape = [](json shape) {
    json p = json::parse(R"({"format":"trainstep","version":1,"name":"m","batch_size":1,
                             "state":[],"functions":{}})");
    p["state"].push_back({{"name", "s"}, {"kind", "param"}, {"dtype", "float32"}, {"shape", shape}});
    return error_of([&] { ts::parse_program(p, "m.tstep"); });
  };
  EXPECT_EQ(parse_state_shape(json(std::vector<int>(100, 1))),
            "m.tstep: program: state 0: shape has rank 100, more than the limit of 16");
  EXPECT_EQ(parse_state_shape({2, -3}),
            "m.tstep: program: state 0: shape [2,-3]: dims must be non-negative integers");
  EXPECT_EQ(parse_state_shape({1 << 21, 1 << 20}),
            "m.tstep: program: state 0: shape [2097152,1048576] has more than 2^40 elements");
}

// A port's role is parsed when the program is read: a misspelt one is an
// error naming the function and port, not a string compared later.
TEST(ProgramRoles, UnknownRoleNamesThePort) {
  json p = json::parse(R"({"format":"trainstep","version":1,"name":"m","batch_size":1,"state":[],
    "functions":{"train_step":{"inputs":[{"name":"x","role":"inptu","dtype":"float32","shape":[1]}],
                               "nodes":[],"outputs":[]}}})");
  const std::string e = error_of([&] { ts::parse_program(p, "m.tstep"); });
  EXPECT_NE(e.find("m.tstep: program: "), std::string::npos) << e;
  EXPECT_NE(e.find("unknown role 'inptu' (expected one of state, grad, lr, rng_seed, rng_offset, "
                   "input, target, loss, output, sample_loss, batch_loss)"),
            std::string::npos)
      << e;
  for (ts::Role r : {ts::Role::State, ts::Role::RngOffset, ts::Role::SampleLoss, ts::Role::BatchLoss}) {
    ts::Role back = ts::Role::Input;
    ASSERT_TRUE(ts::parse_role(ts::role_name(r), &back));
    EXPECT_EQ(back, r);
  }
}

TEST(CheckpointFolder, NamesListsAndPrunes) {
  EXPECT_EQ(ts::default_checkpoint_dir("out/mnist.ckpt"), "out/mnist.checkpoints");
  EXPECT_EQ(ts::default_checkpoint_dir("out/model"), "out/model.checkpoints");
  const std::string dir = make_temp_dir() + "/a/b";
  EXPECT_TRUE(ts::list_checkpoints(dir).empty());  // no folder yet
  ts::make_checkpoint_dir(dir);
  EXPECT_EQ(ts::checkpoint_path(dir, 42), dir + "/step-0000000042.ckpt");
  for (int step : {3, 12, 7, 100}) std::ofstream(ts::checkpoint_path(dir, step)) << "x";
  std::ofstream(dir + "/step-0000000200.ckpt.tmp.1") << "x";  // a killed writer's temp file
  std::ofstream(dir + "/notes.txt") << "x";                    // not ours: kept
  EXPECT_EQ(ts::list_checkpoints(dir).size(), 4u);
  ts::prune_checkpoints(dir, 2);
  std::vector<std::string> left = ts::list_checkpoints(dir);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{ts::checkpoint_path(dir, 12), ts::checkpoint_path(dir, 100)}));
  EXPECT_FALSE(std::ifstream(dir + "/step-0000000200.ckpt.tmp.1").good());
  EXPECT_TRUE(std::ifstream(dir + "/notes.txt").good());
}

TEST(CheckpointMeta, ReadsAndRejectsMalformedMetadata) {
  std::map<std::string, std::string> m = {
      {"format", "trainstep-checkpoint"}, {"format_version", "1"}, {"model", "m"},
      {"step", "9"}, {"seed", "3"}, {"lr", "0.25"},
      {"epoch", "2"}, {"data_position", "5"}, {"base_lr", "0.5"}, {"lr_schedule", "step:1:0.7"},
      {"epoch_loss_sum", "1.25"}, {"epoch_loss_count", "4"}, {"mine", "kept"}};
  ts::CheckpointMeta c = ts::parse_checkpoint_metadata(m, "c");
  EXPECT_EQ(c.step, 9);
  EXPECT_EQ(c.seed, 3);
  EXPECT_EQ(c.lr, 0.25);
  EXPECT_EQ(c.nonfinite_skips, 0);  // absent (older checkpoints): 0
  EXPECT_FALSE(c.checksummed);
  EXPECT_EQ(c.extra, (std::map<std::string, std::string>{{"mine", "kept"}}));
  ASSERT_TRUE(c.run.has_value());
  ts::RunPosition r = ts::resume_position(c, "c");
  EXPECT_EQ(r.epoch, 2);
  EXPECT_EQ(r.batch, 5);
  EXPECT_EQ(r.base_lr, 0.5);
  EXPECT_EQ(r.lr_schedule_unit, "epoch");
  EXPECT_EQ(r.epoch_loss_sum, 1.25);
  EXPECT_EQ(r.accumulate, 1);  // absent (older checkpoints): 1
  EXPECT_EQ(r.samples, -1);     // absent: not recorded (then batch x the batch size)
  EXPECT_EQ(r.world_size, 1);
  // Written and read back, the schema is the identity.
  EXPECT_EQ(ts::checkpoint_metadata(c), ts::checkpoint_metadata(ts::parse_checkpoint_metadata(
                                            ts::checkpoint_metadata(c), "c")));
  {
    auto m2 = m;
    m2["accumulate"] = "4";
    m2["data_samples"] = "640";
    m2["world_size"] = "2";
    const ts::RunPosition r2 = *ts::parse_checkpoint_metadata(m2, "c").run;
    EXPECT_EQ(r2.accumulate, 4);
    EXPECT_EQ(r2.samples, 640);
    EXPECT_EQ(r2.world_size, 2);
    EXPECT_EQ(ts::checkpoint_metadata(ts::parse_checkpoint_metadata(m2, "c")).at("data_samples"), "640");
  }
  auto bad = [&](const char* k, const char* v) {
    auto m2 = m;
    m2[k] = v;
    return error_of([&] { ts::resume_position(ts::parse_checkpoint_metadata(m2, "c"), "c"); });
  };
  EXPECT_EQ(bad("epoch", "2x"), "c: checkpoint metadata has a malformed epoch, data_position, "
                                "base_lr, epoch loss, accumulate, data_samples or world_size");
  EXPECT_EQ(bad("accumulate", "2.5"), "c: checkpoint metadata has a malformed epoch, data_position, "
                                      "base_lr, epoch loss, accumulate, data_samples or world_size");
  EXPECT_EQ(bad("accumulate", "0"), "c: checkpoint metadata has accumulate 0 (must be at least 1)");
  EXPECT_EQ(bad("data_position", "-1"), "c: checkpoint metadata has a negative epoch or data position");
  EXPECT_EQ(bad("world_size", "0"), "c: checkpoint metadata has a bad data_samples or world_size");
  EXPECT_EQ(bad("data_samples", "4"), "c: checkpoint metadata has a bad data_samples or world_size");
  EXPECT_EQ(bad("data_samples", "x"), "c: checkpoint metadata has a malformed epoch, data_position, "
                                      "base_lr, epoch loss, accumulate, data_samples or world_size");
  EXPECT_EQ(bad("base_lr", "inf"), "c: checkpoint metadata has a non-finite base_lr");
  EXPECT_EQ(bad("lr_schedule_unit", "week"), "c: checkpoint has a bad LR schedule unit 'week'");
  EXPECT_EQ(bad("lr_schedule", "step:x").rfind("c: checkpoint has a bad LR schedule: ", 0), 0u);
  EXPECT_EQ(bad("step", "-1"), "c: checkpoint metadata has a negative step or more skipped steps "
                               "than steps");
  EXPECT_EQ(bad("seed", "x"), "c: checkpoint metadata has a malformed step, seed, lr or "
                              "nonfinite_skips");
  EXPECT_EQ(bad("format", "trainstep"), "c: not a trainstep checkpoint");
  EXPECT_EQ(bad("format_version", "2"), "c: unsupported checkpoint version '2'");
  auto no_run = m;
  no_run.erase("epoch");
  EXPECT_EQ(error_of([&] { ts::resume_position(ts::parse_checkpoint_metadata(no_run, "c"), "c"); }),
            "c: checkpoint metadata lacks 'epoch' (it was not saved by train)");
  m.erase("base_lr");
  EXPECT_EQ(error_of([&] { ts::parse_checkpoint_metadata(m, "c"); }),
            "c: checkpoint metadata lacks 'base_lr'");
}

// raise() runs the handler synchronously on this thread: the first signal
// only sets the flag, the second exits at once with 128 + signal.
TEST(StopSignalsDeathTest, FirstSetsTheFlagSecondExits) {
  EXPECT_EXIT(
      {
        const std::atomic<int>& stop = ts::install_stop_signals();
        raise(SIGTERM);
        if (stop.load() != SIGTERM) _exit(1);
        raise(SIGINT);
        _exit(2);  // not reached
      },
      testing::ExitedWithCode(128 + SIGINT), "stopping after the current step");
}

TEST(NonFinite, ScanFindsTheFirstBadElement) {
  for (int threads : {1, 2}) {
    HostTensor f(DType::F32, {1 << 18}), d(DType::F64, {5}), i(DType::I64, {3});
    EXPECT_EQ(ts::first_nonfinite(f.view, threads), -1);
    f.view.as<float>()[200000] = NAN;  // past the parallel threshold, in the second half
    f.view.as<float>()[250000] = -INFINITY;
    EXPECT_EQ(ts::first_nonfinite(f.view, threads), 200000);
    f.view.as<float>()[3] = INFINITY;
    EXPECT_EQ(ts::first_nonfinite(f.view, threads), 3);
    f.view.as<float>()[3] = 3.4e38f;  // the largest finite values are finite
    f.view.as<float>()[200000] = -3.4e38f;
    EXPECT_EQ(ts::first_nonfinite(f.view, threads), 250000);
    d.view.as<double>()[4] = NAN;
    d.view.as<double>()[2] = 1e308;
    EXPECT_EQ(ts::first_nonfinite(d.view, threads), 4);
    i.view.as<int64_t>()[0] = -1;  // all exponent bits set, but an integer
    EXPECT_EQ(ts::first_nonfinite(i.view, threads), -1);
  }
}

// Accumulation (grad_step + apply_grads): a non-finite micro-batch is named
// in Stop mode; in Skip mode it adds nothing and the whole optimizer step is
// dropped, as GradScaler drops a step with any non-finite gradient.
TEST(NonFinite, AccumulatedStepsStopOrSkipAsAWhole) {
  const std::string path = write_tiny_artifact(make_temp_dir(), "w", /*grads=*/true);
  Batch b, nan_batch;
  nan_batch.x.view.as<float>()[0] = NAN;
  auto stop = ts::Session::open(path, with(ts::NonFinite::Stop));
  stop->grad_step({b.x.view}, b.y.view);
  EXPECT_EQ(error_of([&] { stop->grad_step({nan_batch.x.view}, nan_batch.y.view); }),
            "step 0, micro-batch 1: the loss is nan (--on-nonfinite skip drops such steps instead)");

  auto skip = ts::Session::open(path, with(ts::NonFinite::Skip));
  const std::vector<float> w0 = state_of(*skip);
  skip->grad_step({b.x.view}, b.y.view);
  skip->grad_step({nan_batch.x.view}, nan_batch.y.view);
  skip->apply_grads();
  EXPECT_TRUE(skip->last_step_skipped());
  EXPECT_EQ(skip->skipped_steps(), 1);
  EXPECT_EQ(skip->step(), 1);
  EXPECT_EQ(state_of(*skip), w0);
  // An update that overflows is dropped too; a finite one then applies.
  skip->set_lr(INFINITY);
  skip->grad_step({b.x.view}, b.y.view);
  skip->apply_grads();
  EXPECT_EQ(skip->skipped_steps(), 2);
  EXPECT_EQ(state_of(*skip), w0);
  skip->set_lr(0.5);
  skip->grad_step({b.x.view}, b.y.view);
  skip->apply_grads();
  EXPECT_FALSE(skip->last_step_skipped());
  EXPECT_NE(state_of(*skip), w0);
  EXPECT_EQ(skip->step(), 3);
}

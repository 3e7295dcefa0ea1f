// grad_step and apply_step cut from train_step at its named gradients
// (passes/split_train_step.h): the signatures `export --grads` writes, the
// two run one after the other giving train_step's bits, and the refusals
// naming what crosses the cut.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "ir/text.h"
#include "passes/split_train_step.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"

namespace {

// A linear layer with a squared-error loss, SGD with momentum, and a buffer
// renewed from the batch. The constant k is read on both sides of the cut.
const char* kTrain =
    "func train_step(%w: float32[16, 12] {role=state, state=w}, %b: float32[16] {role=state, "
    "state=b}, %count: float32[16] {role=state, state=count}, %mw: float32[16, 12] "
    "{role=state, state=mom/w}, %mb: float32[16] {role=state, state=mom/b}, %lr: float32[] "
    "{role=lr}, %x: float32[8, 12] {role=input}, %t: float32[8, 16] {role=target}) {\n"
    "  %k = trainstep.constant() {\"dtype\":\"float64\",\"value\":0.9,\"wrapped\":true}\n"
    "  %y0 = trainstep.matmul(%x, %w) {\"trans_a\":false,\"trans_b\":true}\n"
    "  %y = aten.add.Tensor(%y0, %b) {\"alpha\":1}\n"
    "  %d = aten.sub.Tensor(%y, %t) {\"alpha\":1}\n"
    "  %sq = aten.mul.Tensor(%d, %d)\n"
    "  %loss = aten.sum.default(%sq) {\"dtype\":null}\n"
    "  %seen = aten.sum.dim_IntList(%y) {\"dim\":[0],\"dtype\":null,\"keepdim\":false}\n"
    "  %kc = aten.mul.Tensor(%count, %k)\n"
    "  %count2 = aten.add.Tensor(%kc, %seen) {\"alpha\":1}\n"
    "  %g = aten.add.Tensor(%d, %d) {\"alpha\":1}\n"
    "  %gw = trainstep.matmul(%g, %x) {\"trans_a\":true,\"trans_b\":false}\n"
    "  %gb = aten.sum.dim_IntList(%g) {\"dim\":[0],\"dtype\":null,\"keepdim\":false}\n"
    "  %mwk = aten.mul.Tensor(%mw, %k)\n"
    "  %mw2 = aten.add.Tensor(%mwk, %gw) {\"alpha\":1}\n"
    "  %sw = aten.mul.Tensor(%mw2, %lr)\n"
    "  %w2 = aten.sub.Tensor(%w, %sw) {\"alpha\":1}\n"
    "  %mbk = aten.mul.Tensor(%mb, %k)\n"
    "  %mb2 = aten.add.Tensor(%mbk, %gb) {\"alpha\":1}\n"
    "  %sb = aten.mul.Tensor(%mb2, %lr)\n"
    "  %b2 = aten.sub.Tensor(%b, %sb) {\"alpha\":1}\n"
    "  return %loss {role=loss}, %w2 {role=state, state=w}, %b2 {role=state, state=b}, "
    "%count2 {role=state, state=count}, %mw2 {role=state, state=mom/w}, %mb2 {role=state, "
    "state=mom/b}\n}\n";

int value(const ts::Function& f, const std::string& name) {
  for (size_t v = 0; v < f.value_names.size(); ++v)
    if (f.value_names[v] == name) return static_cast<int>(v);
  ADD_FAILURE() << "no value " << name;
  return 0;
}

// The program around a train_step text, its gradients named as the
// exporter names them.
ts::Program program(const std::string& text, bool name_grads = true) {
  ts::Program p;
  p.functions["train_step"] = ts::parse_function(text);
  ts::Function& f = p.functions["train_step"];
  auto type = [&](const char* port) { return f.inputs[f.find_input(ts::Role::State, port)].type; };
  for (const char* s : {"w", "b"}) p.state.push_back({s, "param", type(s)});
  p.state.push_back({"count", "buffer", type("count")});
  for (const char* s : {"mom/w", "mom/b"}) p.state.push_back({s, "optim", type(s)});
  if (name_grads)
    for (const auto& [param, v] : {std::pair{"w", "gw"}, std::pair{"b", "gb"}}) {
      ts::Port g;
      g.role = ts::Role::Grad;
      g.state = param;
      g.value = value(f, v);
      g.type = f.value_types[g.value];
      f.grads.push_back(g);
    }
  return p;
}

std::vector<std::string> ports(const std::vector<ts::Port>& ps) {
  std::vector<std::string> r;
  for (const auto& p : ps)
    r.push_back(std::string(ts::role_name(p.role)) + (p.state.empty() ? "" : ":" + p.state));
  return r;
}

std::string error_of(const ts::Program& p) {
  try {
    ts::split_train_step(p, "art.tstep");
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(SplitTrainStep, GivesTheSignaturesOfExportGrads) {
  const ts::SplitSteps s = ts::split_train_step(program(kTrain), "art.tstep");
  using V = std::vector<std::string>;
  EXPECT_EQ(ports(s.grad.inputs), (V{"state:w", "state:b", "state:count", "input", "target"}));
  EXPECT_EQ(ports(s.grad.outputs), (V{"loss", "state:count", "grad:w", "grad:b"}));
  EXPECT_EQ(ports(s.apply.inputs),
            (V{"state:w", "state:b", "state:mom/w", "state:mom/b", "lr", "grad:w", "grad:b"}));
  EXPECT_EQ(ports(s.apply.outputs), (V{"state:w", "state:b", "state:mom/w", "state:mom/b"}));
  EXPECT_EQ(s.apply.inputs[5].name, "grad/w");
  // Each side has only its own nodes; the constant is in both.
  auto has = [](const ts::Function& f, const char* node) {
    for (const auto& n : f.nodes)
      if (n.name == node) return true;
    return false;
  };
  for (const char* n : {"k", "y0", "loss", "count2", "gw", "gb"}) EXPECT_TRUE(has(s.grad, n)) << n;
  for (const char* n : {"mw2", "w2", "mb2", "b2"}) EXPECT_FALSE(has(s.grad, n)) << n;
  for (const char* n : {"k", "mw2", "w2", "mb2", "b2"}) EXPECT_TRUE(has(s.apply, n)) << n;
  for (const char* n : {"y0", "loss", "gw", "gb", "count2"}) EXPECT_FALSE(has(s.apply, n)) << n;
}

TEST(SplitTrainStep, GradThenApplyComputesTrainStepsBits) {
  const ts::Program p = program(kTrain);
  const ts::Function& f = p.function("train_step");
  const ts::SplitSteps s = ts::split_train_step(p, "art.tstep");
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  std::map<std::string, ts::HostTensor> in;  // by input name
  for (const auto& q : f.inputs) {
    ts::HostTensor h(q.type.dtype, q.type.shape);
    for (int64_t i = 0; i < h.view.numel(); ++i) h.view.as<float>()[i] = dist(rng);
    in.emplace(q.name, std::move(h));
  }
  *in.at("lr").view.as<float>() = 0.05f;

  ts::Executor train(f, 1, ts::plan_memory(f, false));
  for (size_t i = 0; i < f.inputs.size(); ++i) train.bind_input(int(i), in.at(f.inputs[i].name).view.data);
  train.run();
  ts::Executor grad(s.grad, 1, ts::plan_memory(s.grad, false));
  for (size_t i = 0; i < s.grad.inputs.size(); ++i)
    grad.bind_input(int(i), in.at(s.grad.inputs[i].name).view.data);
  grad.run();
  ts::Executor apply(s.apply, 1, ts::plan_memory(s.apply, false));
  for (size_t i = 0; i < s.apply.inputs.size(); ++i) {
    const ts::Port& q = s.apply.inputs[i];
    apply.bind_input(int(i), q.role == ts::Role::Grad
                                 ? grad.output(s.grad.find_output(ts::Role::Grad, q.state)).data
                                 : in.at(q.name).view.data);
  }
  apply.run();

  auto same = [](const ts::Tensor& a, const ts::Tensor& b) {
    return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
  };
  EXPECT_TRUE(same(train.output(f.find_output(ts::Role::Loss)),
                   grad.output(s.grad.find_output(ts::Role::Loss))));
  EXPECT_TRUE(same(train.output(f.find_output(ts::Role::State, "count")),
                   grad.output(s.grad.find_output(ts::Role::State, "count"))));
  for (const char* st : {"w", "b", "mom/w", "mom/b"})
    EXPECT_TRUE(same(train.output(f.find_output(ts::Role::State, st)),
                     apply.output(s.apply.find_output(ts::Role::State, st))))
        << st;
}

TEST(SplitTrainStep, RefusesWhatCrossesTheCut) {
  EXPECT_NE(error_of(program(kTrain, false))
                .find("art.tstep: deriving grad_step and apply_step from train_step: the artifact "
                      "names no gradients in train_step"),
            std::string::npos)
      << error_of(program(kTrain, false));

  // An update that reads the loss reads the batch.
  std::string reads_loss = kTrain;
  reads_loss.replace(reads_loss.find("%sw = aten.mul.Tensor(%mw2, %lr)"), 32,
                     "%sw = aten.mul.Tensor(%mw2, %loss)");
  const std::string e1 = error_of(program(reads_loss));
  EXPECT_NE(e1.find("the new state 'w' reads the step input 't' (role target) (node 'd')"),
            std::string::npos)
      << e1;

  // A loss that reads the optimizer state.
  std::string reads_optim = kTrain;
  reads_optim.replace(reads_optim.find("%sq = aten.mul.Tensor(%d, %d)"), 29,
                      "%sq = aten.mul.Tensor(%d, %mb)");
  const std::string e2 = error_of(program(reads_optim));
  EXPECT_NE(e2.find("the loss reads the step input 'mb' (role state) (node 'sq'), which only "
                    "the update should"),
            std::string::npos)
      << e2;
}

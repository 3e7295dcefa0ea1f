// The static memory plan (runtime/memory_plan.h), the executor's in-place
// state update and its thread count, on small functions built from program JSON.
#include <gtest/gtest.h>

#include <cstring>
#include <omp.h>

#include <nlohmann/json.hpp>

#include "ir/program.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"

using json = nlohmann::json;
using ts::Function;
using ts::MemoryPlan;

namespace {

json in_port(const char* name, const char* role, json shape, const char* state = nullptr) {
  json p = {{"name", name}, {"role", role}, {"dtype", "float32"}, {"shape", shape}};
  if (state) p["state"] = state;
  return p;
}
json out_port(const char* value, const char* role, json shape, const char* state = nullptr) {
  json p = {{"value", value}, {"role", role}, {"dtype", "float32"}, {"shape", shape}};
  if (state) p["state"] = state;
  return p;
}
json node(const char* name, const char* op, json inputs, json shape, json attrs = json::object()) {
  return {{"name", name}, {"op", op}, {"inputs", inputs}, {"attrs", attrs},
          {"outputs", {name}}, {"types", {{{"dtype", "float32"}, {"shape", shape}}}}};
}

// Parses and verifies `train` as a program's train_step; `states` lists the
// state tensors (name, shape) its state inputs refer to.
Function function_of(json train, std::vector<std::pair<const char*, json>> states = {}) {
  json st = json::array();
  for (auto& [n, s] : states)
    st.push_back({{"name", n}, {"kind", "param"}, {"dtype", "float32"}, {"shape", s}});
  json empty = {{"inputs", json::array()}, {"nodes", json::array()}, {"outputs", json::array()}};
  json program = {{"format", "trainstep"}, {"version", 1}, {"name", "t"}, {"batch_size", 1},
                  {"state", st}, {"functions", {{"train_step", train}, {"eval_step", empty}}}};
  return ts::parse_program(program, "test").function("train_step");
}

// Makes every node of `op` claim same_index, as the fusion passes' fused
// nodes will (the registry's plain ops do not claim it yet).
void mark_same_index(Function& f, const std::string& op) {
  static std::vector<std::unique_ptr<ts::OpDef>> defs;
  for (auto& n : f.nodes)
    if (n.op == op) {
      defs.push_back(std::make_unique<ts::OpDef>(*n.def));
      defs.back()->same_index = true;
      n.def = defs.back().get();
    }
}

// The plan's invariants, checked against the function independently.
void expect_sound(const Function& f, const MemoryPlan& p) {
  const int end = int(f.nodes.size());
  for (int i = 0; i < end; ++i) {
    if (f.nodes[i].def->alias_input0) continue;
    for (int v : f.nodes[i].inputs) {
      if (v < 0) continue;
      int r = p.root[v];
      EXPECT_TRUE(p.live[v]) << f.value_names[v];
      EXPECT_LE(p.first[r], i) << f.value_names[v];
      EXPECT_GE(p.last[r], i) << f.value_names[v] << " is read at " << i;
    }
  }
  for (const auto& o : f.outputs) EXPECT_EQ(p.last[p.root[o.value]], end);
  std::vector<int> slots;
  for (size_t v = 0; v < p.root.size(); ++v) {
    if (!p.has_slot(int(v))) continue;
    slots.push_back(int(v));
    EXPECT_EQ(p.root[v], int(v));
    EXPECT_EQ(p.offset[v] % 64, 0u);
    EXPECT_GE(p.size[v], f.value_types[v].nbytes());
    EXPECT_LE(p.offset[v] + p.size[v], p.arena_bytes);
  }
  for (int a : slots)
    for (int b : slots) {
      if (a >= b) continue;
      bool live_together = p.first[a] <= p.last[b] && p.first[b] <= p.last[a];
      bool share = p.offset[a] < p.offset[b] + p.size[b] && p.offset[b] < p.offset[a] + p.size[a];
      EXPECT_FALSE(live_together && share)
          << f.value_names[a] << " and " << f.value_names[b] << " are live together and share memory";
    }
}

int value_of(const Function& f, const std::string& name) {
  for (size_t v = 0; v < f.value_names.size(); ++v)
    if (f.value_names[v] == name) return int(v);
  ADD_FAILURE() << "no value " << name;
  return -1;
}

// y = neg(exp(neg(relu(x)))): each link dies at the next node.
json chain() {
  return {{"inputs", {in_port("x", "input", {256})}},
          {"nodes",
           {node("a", "aten.relu.default", {"x"}, {256}), node("b", "aten.neg.default", {"a"}, {256}),
            node("c", "aten.exp.default", {"b"}, {256}), node("d", "aten.neg.default", {"c"}, {256}),
            node("e", "aten.relu.default", {"d"}, {256})}},
          {"outputs", {out_port("e", "loss", {256})}}};
}

// w2 = w - lr, optionally with more nodes after it.
json sgd_like(json extra_nodes = json::array(), json extra_outputs = json::array()) {
  json nodes = {node("w2", "aten.sub.Tensor", {"w", "lr"}, {4, 3}, {{"alpha", 1}})};
  for (auto& n : extra_nodes) nodes.push_back(n);
  json outs = {out_port("w2", "state", {4, 3}, "w")};
  for (auto& o : extra_outputs) outs.push_back(o);
  return {{"inputs", {in_port("w", "state", {4, 3}, "w"), in_port("lr", "lr", json::array())}},
          {"nodes", nodes},
          {"outputs", outs}};
}

}  // namespace

TEST(MemoryPlan, ChainReusesMemory) {
  Function f = function_of(chain());
  // In-place reuse off: placement alone shares slots between disjoint lifetimes.
  MemoryPlan p = ts::plan_memory(f, false);
  expect_sound(f, p);
  EXPECT_EQ(p.naive_bytes, 5u * 1024);
  EXPECT_EQ(p.arena_bytes, 2u * 1024);  // two values are live at any node
  EXPECT_LT(p.arena_bytes, p.naive_bytes);
  EXPECT_EQ(p.offset[value_of(f, "a")], p.offset[value_of(f, "c")]);
  // With reuse, each pointwise node writes over its dying input: one slot.
  MemoryPlan q = ts::plan_memory(f, true);
  expect_sound(f, q);
  EXPECT_EQ(q.arena_bytes, 1024u);
}

TEST(MemoryPlan, ViewsExtendTheirBaseAndUnreadValuesGetNoSlot) {
  // a is read through its view v after b and c are made: a must stay apart
  // from both. u is read by nobody.
  Function f = function_of(
      {{"inputs", {in_port("x", "input", {4, 3})}},
       {"nodes",
        {node("a", "aten.relu.default", {"x"}, {4, 3}),
         node("v", "aten.view.default", {"a"}, {12}, {{"size", {12}}}),
         node("u", "aten.neg.default", {"x"}, {4, 3}),
         node("b", "aten.neg.default", {"x"}, {4, 3}),
         node("c", "aten.exp.default", {"b"}, {4, 3}),
         node("cv", "aten.view.default", {"c"}, {12}, {{"size", {12}}}),
         node("d", "aten.add.Tensor", {"v", "cv"}, {12}, {{"alpha", 1}})}},
       {"outputs", {out_port("d", "loss", {12})}}});
  MemoryPlan p = ts::plan_memory(f, false);
  expect_sound(f, p);
  int a = value_of(f, "a"), v = value_of(f, "v"), u = value_of(f, "u");
  EXPECT_EQ(p.root[v], a);
  EXPECT_FALSE(p.has_slot(v));
  EXPECT_FALSE(p.live[u]);
  EXPECT_FALSE(p.has_slot(u));
  EXPECT_EQ(p.last[a], 6);  // d, the view's reader
  EXPECT_NE(p.offset[a], p.offset[value_of(f, "b")]);
  EXPECT_NE(p.offset[a], p.offset[value_of(f, "c")]);
}

TEST(MemoryPlan, DonatesAnInPlaceUpdate) {
  Function f = function_of(sgd_like(), {{"w", {4, 3}}});
  mark_same_index(f, "aten.sub.Tensor");  // it is in the registry too; be explicit
  MemoryPlan p = ts::plan_memory(f, true);
  expect_sound(f, p);
  ASSERT_EQ(p.donated, std::vector<int>{0});
  EXPECT_EQ(p.root[value_of(f, "w2")], value_of(f, "w"));
  EXPECT_EQ(p.arena_bytes, 0u);
  EXPECT_TRUE(ts::plan_memory(f, false).donated.empty());  // --no-inplace
}

TEST(MemoryPlan, DonatesWhenTheOldValueDiedEarlier) {
  // w2 = (w * 2) + lr: the producing add does not read w at all.
  Function f = function_of(
      {{"inputs", {in_port("w", "state", {8}, "w"), in_port("lr", "lr", json::array())}},
       {"nodes",
        {node("t", "aten.mul.Scalar", {"w"}, {8}, {{"other", 2}}),
         node("w2", "aten.add.Tensor", {"t", "lr"}, {8}, {{"alpha", 1}})}},
       {"outputs", {out_port("w2", "state", {8}, "w")}}},
      {{"w", {8}}});
  MemoryPlan p = ts::plan_memory(f, true);
  expect_sound(f, p);
  EXPECT_EQ(p.donated, std::vector<int>{0});
}

TEST(MemoryPlan, NoDonationWhenTheOldValueIsReadAfterTheUpdate) {
  Function f = function_of(sgd_like({node("y", "aten.neg.default", {"w"}, {4, 3})},
                                    {out_port("y", "loss", {4, 3})}),
                           {{"w", {4, 3}}});
  mark_same_index(f, "aten.sub.Tensor");
  MemoryPlan p = ts::plan_memory(f, true);
  expect_sound(f, p);
  EXPECT_TRUE(p.donated.empty());
}

TEST(MemoryPlan, NoDonationWhenAViewOfTheOldValueIsReadAfter) {
  Function f = function_of(
      sgd_like({node("wv", "aten.view.default", {"w"}, {12}, {{"size", {12}}}),
                node("y", "aten.neg.default", {"wv"}, {12})},
               {out_port("y", "loss", {12})}),
      {{"w", {4, 3}}});
  // The view node comes after w2 in the list; move it before so that only its
  // reader is late.
  std::swap(f.nodes[0], f.nodes[1]);
  mark_same_index(f, "aten.sub.Tensor");
  EXPECT_TRUE(ts::plan_memory(f, true).donated.empty());
}

TEST(MemoryPlan, NoDonationWhenTheOldValueIsAnOutput) {
  Function f = function_of(sgd_like({}, {out_port("w", "loss", {4, 3})}), {{"w", {4, 3}}});
  mark_same_index(f, "aten.sub.Tensor");
  EXPECT_TRUE(ts::plan_memory(f, true).donated.empty());
}

TEST(MemoryPlan, NoDonationWhenTheUpdateBroadcasts) {
  // The update reads the old value through a [4] view broadcast against
  // [1, 4]: not read at the same position, so not done in place.
  Function f = function_of(
      {{"inputs", {in_port("w", "state", {1, 4}, "w"), in_port("g", "input", {1, 4})}},
       {"nodes",
        {node("wv", "aten.view.default", {"w"}, {4}, {{"size", {4}}}),
         node("w2", "aten.sub.Tensor", {"wv", "g"}, {1, 4}, {{"alpha", 1}})}},
       {"outputs", {out_port("w2", "state", {1, 4}, "w")}}},
      {{"w", {1, 4}}});
  mark_same_index(f, "aten.sub.Tensor");
  EXPECT_TRUE(ts::plan_memory(f, true).donated.empty());
  // And a new state broadcast to a bigger shape never fits the old buffer.
  Function g = function_of(
      {{"inputs", {in_port("b", "state", {3}, "b"), in_port("g", "input", {4, 3})}},
       {"nodes", {node("b2", "aten.sub.Tensor", {"b", "g"}, {4, 3}, {{"alpha", 1}})}},
       {"outputs", {out_port("b2", "state", {4, 3}, "b")}}},
      {{"b", {3}}});
  mark_same_index(g, "aten.sub.Tensor");
  EXPECT_TRUE(ts::plan_memory(g, true).donated.empty());
}

TEST(Executor, InPlaceUpdateWritesTheBoundStateBuffer) {
  Function f = function_of(sgd_like({node("y", "aten.neg.default", {"w2"}, {4, 3})},
                                    {out_port("y", "loss", {4, 3})}),
                           {{"w", {4, 3}}});
  mark_same_index(f, "aten.sub.Tensor");
  float lr = 0.5f;
  for (bool inplace : {false, true}) {
    float w[12];
    for (int i = 0; i < 12; ++i) w[i] = float(i);
    ts::Executor ex(f, 1, inplace);
    EXPECT_EQ(ex.plan().donated.size(), inplace ? 1u : 0u);
    ex.bind_input(0, w);
    ex.bind_input(1, &lr);
    for (int step = 1; step <= 2; ++step) {
      ex.run();
      const float* w2 = ex.output(0).as<float>();
      const float* y = ex.output(1).as<float>();
      EXPECT_EQ(w2 == w, inplace);
      float expect = 3.0f - (inplace ? step : 1) * 0.5f;  // in place: w itself moves on
      EXPECT_FLOAT_EQ(w2[3], expect);
      EXPECT_FLOAT_EQ(y[3], -expect);
      EXPECT_FLOAT_EQ(w[3], inplace ? expect : 3.0f);
    }
    // A rebind moves the donated output with the input.
    float w_other[12] = {};
    ex.bind_input(0, w_other);
    ex.run();
    EXPECT_EQ(ex.output(0).data == w_other, inplace);
    EXPECT_FLOAT_EQ(ex.output(0).as<float>()[0], -0.5f);
  }
}

// threads 0 is OpenMP's count when the kernels are built: a kernel told 0
// planned for one thread, so the CLI's default (all cores) ran our own
// kernels serially.
TEST(Executor, ZeroThreadsTakesOpenMpsCountAtCompile) {
  const Function f = function_of(chain());
  const int was = omp_get_max_threads();
  omp_set_num_threads(3);
  ts::Executor ex(f, 0);
  EXPECT_EQ(ex.threads(), 3);
  ts::Executor two(f, 2);
  EXPECT_EQ(two.threads(), 2);
  omp_set_num_threads(was);
}

// Elementwise fusion: the fused kernel against its member ops run one by one
// (bit for bit), and the fusion pass on small hand-built functions.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "elem_test_util.h"
#include "ir/program.h"
#include "passes/fuse_elementwise.h"
#include "runtime/executor.h"

namespace {

using elemtest::Arg;
using ts::DType;
using ts::Shape;
using json = nlohmann::json;

// Same float, NaN equal to NaN.
bool same_float(float a, float b) {
  if (a != a && b != b) return true;
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void expect_same(const ts::Tensor& a, const ts::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype, b.dtype) << what;
  ASSERT_EQ(a.shape, b.shape) << what;
  const int64_t n = a.numel();
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    bool ok = a.dtype == DType::Bool ? a.as<bool>()[i] == b.as<bool>()[i]
                                     : same_float(a.as<float>()[i], b.as<float>()[i]);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " differs at " << i << ": " << elemtest::get(a, i) << " vs "
                    << elemtest::get(b, i);
    }
  }
}

// A group program written as members {op, attrs, args}; args name inputs
// ("in", k) or earlier members ("m", j).
struct Prog {
  json members = json::array();
  json outputs = json::array();
  // (args as a vector: a braced list of ["in", k] pairs would make a JSON object)
  int add(const std::string& op, json attrs, const std::vector<json>& args) {
    json a = json::array();
    for (const auto& x : args) a.push_back(x);
    if (attrs.is_null()) attrs = json::object();
    members.push_back({{"name", "m" + std::to_string(members.size())}, {"op", op}, {"attrs", attrs},
                       {"args", a}});
    return static_cast<int>(members.size()) - 1;
  }
  int cst(double v, const char* dtype = "float64") {
    return add("trainstep.constant", {{"value", v}, {"dtype", dtype}, {"wrapped", true}}, {});
  }
  void out(int j) { outputs.push_back(j); }
};

json in(int k) { return {"in", k}; }
json m(int j) { return {"m", j}; }

// Runs the members one by one with their own kernels, then the fused op,
// and compares every output.
void check_fused(const Prog& p, const std::vector<Arg>& inputs, int threads = 1) {
  std::vector<Arg> vals;
  for (const auto& mem : p.members) {
    std::vector<Arg> args;
    for (const auto& a : mem["args"])
      args.push_back(a[0] == "in" ? inputs[a[1].get<int>()] : vals[a[1].get<int>()]);
    auto ty = elemtest::infer(mem["op"], mem["attrs"], args);
    Arg r = elemtest::run(mem["op"], mem["attrs"], args, threads)[0];
    r.wrapped = ty[0].wrapped;
    vals.push_back(r);
  }
  json attrs = {{"members", p.members}, {"outputs", p.outputs}};
  auto fused = elemtest::run("trainstep.fused_elementwise", attrs, inputs, threads);
  ASSERT_EQ(fused.size(), p.outputs.size());
  for (size_t o = 0; o < fused.size(); ++o)
    expect_same(fused[o].tensor(), vals[p.outputs[o].get<int>()].tensor(),
                "output " + std::to_string(o));
}

// Adadelta's update of one parameter, as the exporter writes it.
Prog adadelta() {
  Prog p;  // inputs: 0 square_avg, 1 grad, 2 acc_delta, 3 param, 4 lr (0-d)
  int c9 = p.cst(0.9), c1 = p.cst(0.09999999999999998), e = p.cst(1e-6);
  int a = p.add("aten.mul.Tensor", {}, {in(0), m(c9)});
  int b = p.add("aten.mul.Tensor", {}, {in(1), m(c1)});
  int b2 = p.add("aten.mul.Tensor", {}, {m(b), in(1)});
  int sq = p.add("aten.add.Tensor", {{"alpha", 1}}, {m(a), m(b2)});
  int s1 = p.add("aten.add.Tensor", {{"alpha", 1}}, {m(sq), m(e)});
  int r1 = p.add("aten.sqrt.default", {}, {m(s1)});
  int s2 = p.add("aten.add.Tensor", {{"alpha", 1}}, {in(2), m(e)});
  int r2 = p.add("aten.sqrt.default", {}, {m(s2)});
  int d = p.add("aten.div.Tensor", {}, {m(r2), m(r1)});
  int delta = p.add("aten.mul.Tensor", {}, {m(d), in(1)});
  int x = p.add("aten.mul.Tensor", {}, {in(2), m(c9)});
  int y = p.add("aten.mul.Tensor", {}, {m(delta), m(c1)});
  int y2 = p.add("aten.mul.Tensor", {}, {m(y), m(delta)});
  int acc = p.add("aten.add.Tensor", {{"alpha", 1}}, {m(x), m(y2)});
  int st = p.add("aten.mul.Tensor", {}, {in(4), m(delta)});
  int w = p.add("aten.sub.Tensor", {{"alpha", 1}}, {in(3), m(st)});
  p.out(sq);
  p.out(acc);
  p.out(w);
  return p;
}

TEST(FusedKernel, AdadeltaMatchesUnfused) {
  std::mt19937 rng(1);
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(2373), int64_t(70001)}) {
    std::vector<Arg> ins = {elemtest::random(DType::F32, {n}, rng, 0, 1),
                            elemtest::random(DType::F32, {n}, rng),
                            elemtest::random(DType::F32, {n}, rng, 0, 1),
                            elemtest::random(DType::F32, {n}, rng),
                            elemtest::tensor(DType::F32, {}, {0.37})};
    check_fused(adadelta(), ins, 1);
    check_fused(adadelta(), ins, 2);
  }
}

TEST(FusedKernel, DropoutReluBackwardBoolOutputs) {
  Prog p;  // inputs: 0 x, 1 u, 2 grad
  int le = p.add("aten.le.Scalar", {{"other", 0}}, {in(0)});
  int z = p.add("aten.scalar_tensor.default", {{"s", 0}, {"dtype", "float32"}}, {});
  int wh = p.add("aten.where.self", {}, {m(le), m(z), in(2)});
  int ge = p.add("aten.ge.Scalar", {{"other", 0.25}}, {in(1)});
  int mu = p.add("aten.mul.Tensor", {}, {m(wh), m(ge)});
  int c = p.cst(0.75);
  int dv = p.add("aten.div.Tensor", {}, {m(mu), m(c)});
  p.out(wh);
  p.out(ge);
  p.out(dv);
  std::mt19937 rng(2);
  const Shape s = {64, 37};
  check_fused(p, {elemtest::random(DType::F32, s, rng), elemtest::random(DType::F32, s, rng, 0, 1),
                  elemtest::random(DType::F32, s, rng)});
}

TEST(FusedKernel, EveryTileForm) {
  std::mt19937 rng(3);
  const Shape s = {3, 1001};
  auto x = elemtest::random(DType::F32, s, rng);
  auto y = elemtest::random(DType::F32, s, rng);
  for (int64_t i = 0; i < 3003; i += 97) y.data<float>()[i] = x.data<float>()[i];  // ties
  y.data<float>()[5] = std::nanf("");
  x.data<float>()[7] = std::nanf("");
  auto b = elemtest::random(DType::Bool, s, rng);
  auto z = elemtest::tensor(DType::F32, {}, {0.5});
  auto zi = elemtest::tensor(DType::I64, {}, {3});
  // inputs: 0 x, 1 y, 2 b (bool), 3 0-d float, 4 0-d int64
  std::vector<Arg> ins = {x, y, b, z, zi};
  Prog p;
  auto un = [&](const char* op, json arg) { p.out(p.add(op, {}, {arg})); };
  int ax = p.add("aten.abs.default", {}, {in(0)});
  p.out(ax);
  for (const char* op : {"aten.neg.default", "aten.exp.default", "aten.relu.default",
                         "aten.sigmoid.default", "aten.tanh.default", "aten.reciprocal.default",
                         "aten.sign.default"})
    un(op, in(0));
  for (const char* op : {"aten.log.default", "aten.sqrt.default", "aten.rsqrt.default"}) un(op, m(ax));
  un("aten.exp.default", in(2));  // bool -> float32
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 2.5})
    p.out(p.add("aten.pow.Tensor_Scalar", {{"exponent", e}}, {m(ax)}));
  for (const char* op : {"aten.add.Tensor", "aten.sub.Tensor"}) {
    p.out(p.add(op, {{"alpha", 1}}, {in(0), in(1)}));
    p.out(p.add(op, {{"alpha", 2.5}}, {in(0), in(1)}));
    p.out(p.add(op, {{"alpha", -1}}, {in(3), in(0)}));
  }
  for (const char* op : {"aten.mul.Tensor", "aten.div.Tensor", "aten.maximum.default",
                         "aten.minimum.default", "aten.pow.Tensor_Tensor"}) {
    p.out(p.add(op, {}, {in(0), in(1)}));
    p.out(p.add(op, {}, {in(0), in(4)}));
  }
  p.out(p.add("aten.mul.Tensor", {}, {in(0), in(2)}));  // float * bool
  // bool arithmetic (hardtanh's backward ors two masks with add)
  int lt0 = p.add("aten.lt.Scalar", {{"other", 0.0}}, {in(0)});
  p.out(p.add("aten.add.Tensor", {{"alpha", 1}}, {in(2), m(lt0)}));
  for (const char* op : {"aten.mul.Tensor", "aten.maximum.default", "aten.minimum.default"})
    p.out(p.add(op, {}, {in(2), m(lt0)}));
  p.out(p.add("aten.add.Scalar", {{"other", true}, {"alpha", 1}}, {in(2)}));
  p.out(p.add("aten.mul.Scalar", {{"other", false}}, {in(2)}));
  p.out(p.add("aten.add.Scalar", {{"other", 1.5}, {"alpha", 2}}, {in(0)}));
  p.out(p.add("aten.sub.Scalar", {{"other", 3}, {"alpha", 1}}, {in(0)}));
  p.out(p.add("aten.mul.Scalar", {{"other", 0.1}}, {in(0)}));
  p.out(p.add("aten.div.Scalar", {{"other", 3}}, {in(0)}));
  for (const char* c : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    p.out(p.add(std::string("aten.") + c + ".Tensor", {}, {in(0), in(1)}));
    p.out(p.add(std::string("aten.") + c + ".Tensor", {}, {in(0), in(3)}));
    p.out(p.add(std::string("aten.") + c + ".Tensor", {}, {in(2), m(0)}));  // bool vs float
    p.out(p.add(std::string("aten.") + c + ".Scalar", {{"other", 0.25}}, {in(0)}));
    p.out(p.add(std::string("aten.") + c + ".Scalar", {{"other", true}}, {in(2)}));  // bool compare
  }
  int cond = p.add("aten.gt.Tensor", {}, {in(0), in(1)});
  p.out(p.add("aten.where.self", {}, {m(cond), in(0), in(1)}));
  p.out(p.add("aten.where.self", {}, {in(2), in(3), in(1)}));
  p.out(p.add("aten.where.self", {}, {in(2), in(0), in(4)}));
  int tb = p.add("aten._to_copy.default", {{"dtype", "bool"}}, {in(0)});
  p.out(tb);
  p.out(p.add("aten._to_copy.default", {{"dtype", "float32"}}, {m(tb)}));
  p.out(p.add("aten._to_copy.default", {{"dtype", "float32"}}, {in(2)}));
  p.out(p.add("aten.clone.default", {}, {in(0)}));
  p.out(p.add("aten.clone.default", {}, {in(2)}));
  p.out(p.add("aten.clamp.default", {{"min", -0.5}, {"max", 0.75}}, {in(0)}));
  p.out(p.add("aten.clamp.default", {{"min", nullptr}, {"max", 1}}, {in(0)}));
  check_fused(p, ins);
}

TEST(FusedKernel, ZeroDInputsChangeBetweenRuns) {
  Prog p;
  p.out(p.add("aten.mul.Tensor", {}, {in(0), in(1)}));
  json attrs = {{"members", p.members}, {"outputs", p.outputs}};
  auto x = elemtest::tensor(DType::F32, {4}, {1, 2, 3, 4});
  auto lr = elemtest::tensor(DType::F32, {}, {2});
  auto ctx = elemtest::node_ctx("trainstep.fused_elementwise", attrs, {x, lr});
  const auto& def = elemtest::op_def("trainstep.fused_elementwise");
  auto types = def.infer(ctx);
  ts::KernelCtx kc{ctx, types, 1};
  auto k = def.make(kc);
  ts::HostTensor out(DType::F32, {4});
  ts::Tensor it[2] = {x.tensor(), lr.tensor()};
  k->run(it, &out.view);
  EXPECT_EQ(out.view.as<float>()[3], 8.0f);
  lr.data<float>()[0] = 3;
  k->run(it, &out.view);
  EXPECT_EQ(out.view.as<float>()[3], 12.0f);
}

// In-place planning may give an output the buffer of a same-typed input
// that dies at the fused node: the result must not change, also when a
// later member still reads that input.
TEST(FusedKernel, OutputSharingAnInputBuffer) {
  Prog p;  // inputs: 0 x, 1 y
  int a = p.add("aten.mul.Scalar", {{"other", 2}}, {in(0)});
  int b = p.add("aten.add.Tensor", {{"alpha", 1}}, {in(0), m(a)});  // reads x after a
  int c = p.add("aten.sub.Tensor", {{"alpha", 1}}, {m(b), in(1)});
  p.out(a);
  p.out(c);
  json attrs = {{"members", p.members}, {"outputs", p.outputs}};
  std::mt19937 rng(5);
  const int64_t n = 5000;
  auto x = elemtest::random(DType::F32, {n}, rng);
  auto y = elemtest::random(DType::F32, {n}, rng);
  auto want = elemtest::run("trainstep.fused_elementwise", attrs, {x, y}, 1);
  auto ctx = elemtest::node_ctx("trainstep.fused_elementwise", attrs, {x, y});
  const auto& def = elemtest::op_def("trainstep.fused_elementwise");
  auto types = def.infer(ctx);
  ts::KernelCtx kc{ctx, types, 1};
  auto k = def.make(kc);
  for (int share = 0; share < 2; ++share) {  // a into x's buffer, then c into y's
    auto x2 = elemtest::tensor(DType::F32, {n}, elemtest::values(x));
    auto y2 = elemtest::tensor(DType::F32, {n}, elemtest::values(y));
    ts::HostTensor other(DType::F32, {n});
    ts::Tensor it[2] = {x2.tensor(), y2.tensor()};
    ts::Tensor ot[2] = {share == 0 ? x2.tensor() : other.view, share == 1 ? y2.tensor() : other.view};
    k->run(it, ot);
    expect_same(ot[0], want[0].tensor(), "a, share " + std::to_string(share));
    expect_same(ot[1], want[1].tensor(), "c, share " + std::to_string(share));
  }
}

TEST(FusedKernel, InferChecksMembers) {
  Prog p;
  p.out(p.add("aten.sum.default", {{"dtype", nullptr}}, {in(0)}));
  json attrs = {{"members", p.members}, {"outputs", p.outputs}};
  auto x = elemtest::tensor(DType::F32, {4}, {1, 2, 3, 4});
  elemtest::expect_error([&] { elemtest::infer("trainstep.fused_elementwise", attrs, {x}); },
                         "tile form");
}

// ---- the pass ----

json port(const std::string& name, const char* dtype, json shape, int index) {
  return {{"name", name}, {"role", "input"}, {"index", index}, {"dtype", dtype}, {"shape", shape}};
}
json node(const std::string& name, const char* op, json inputs, json attrs, const char* dtype,
          json shape) {
  if (attrs.is_null()) attrs = json::object();
  return {{"name", name}, {"op", op}, {"inputs", inputs}, {"attrs", attrs},
          {"outputs", {name}}, {"types", {{{"dtype", dtype}, {"shape", shape}}}}};
}
json out_port(const std::string& v, int index, const char* dtype, json shape) {
  return {{"value", v}, {"role", "output"}, {"index", index}, {"dtype", dtype}, {"shape", shape}};
}

ts::Function make_function(json inputs, json nodes, json outputs) {
  json f = {{"inputs", inputs}, {"nodes", nodes}, {"outputs", outputs}};
  json prog = {{"format", "trainstep"}, {"version", 1}, {"name", "t"}, {"batch_size", 1},
               {"state", json::array()}, {"functions", {{"train_step", f}, {"eval_step", f}}}};
  return ts::parse_program(prog, "test").function("train_step");
}

int count_op(const ts::Function& f, const std::string& op) {
  int n = 0;
  for (const auto& nd : f.nodes) n += nd.op == op;
  return n;
}

// Runs f and g (its fused copy) on the same random float inputs; outputs
// must match bit for bit.
void expect_same_results(const ts::Function& f, const ts::Function& g) {
  std::mt19937 rng(7);
  std::vector<Arg> ins;
  for (const auto& p : f.inputs) ins.push_back(elemtest::random(p.type.dtype, p.type.shape, rng));
  ts::Executor a(f, 1), b(g, 1);
  for (size_t i = 0; i < ins.size(); ++i) {
    a.bind_input(int(i), ins[i].tensor().data);
    b.bind_input(int(i), ins[i].tensor().data);
  }
  a.run();
  b.run();
  for (size_t o = 0; o < f.outputs.size(); ++o)
    expect_same(a.output(int(o)), b.output(int(o)), "function output " + std::to_string(o));
}

TEST(FusePass, ChainWithConstantsBecomesOneNode) {
  json s = {8, 300};
  ts::Function f = make_function(
      {port("x", "float32", s, 0), port("y", "float32", s, 1), port("lr", "float32", json::array(), 2)},
      {node("c", "trainstep.constant", json::array(), {{"value", 0.9}, {"dtype", "float64"}, {"wrapped", true}},
            "float64", json::array()),
       node("a", "aten.mul.Tensor", {"x", "c"}, {}, "float32", s),
       node("b", "aten.add.Tensor", {"a", "y"}, {{"alpha", 1}}, "float32", s),
       node("r", "aten.relu.default", {"b"}, {}, "float32", s),
       node("g", "aten.ge.Scalar", {"r"}, {{"other", 0.5}}, "bool", s),
       node("u", "aten.mul.Tensor", {"lr", "r"}, {}, "float32", s)},
      {out_port("u", 0, "float32", s), out_port("g", 1, "bool", s), out_port("b", 2, "float32", s)});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  ASSERT_EQ(g.nodes.size(), 1u);  // the constant is folded in
  EXPECT_EQ(g.nodes[0].op, "trainstep.fused_elementwise");
  EXPECT_EQ(g.nodes[0].outputs.size(), 3u);  // u, g and b are read outside
  expect_same_results(f, g);
}

TEST(FusePass, NoFusionThroughANonFusableConsumer) {
  // a -> s (sum, not fusable) -> c, and a -> c: fusing a and c would put a
  // after s, which reads it.
  json s = {16, 16};
  ts::Function f = make_function(
      {port("x", "float32", s, 0), port("y", "float32", s, 1)},
      {node("a", "aten.mul.Tensor", {"x", "y"}, {}, "float32", s),
       node("s", "aten.sum.default", {"a"}, {{"dtype", nullptr}}, "float32", json::array()),
       node("c", "aten.add.Tensor", {"a", "s"}, {{"alpha", 1}}, "float32", s)},
      {out_port("c", 0, "float32", s)});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  EXPECT_EQ(count_op(g, "trainstep.fused_elementwise"), 0);
  EXPECT_EQ(g.nodes.size(), 3u);
  expect_same_results(f, g);
}

TEST(FusePass, LaterOutsideConsumerIsFine) {
  // a -> c fuse; s reads a after c, so a becomes a fused output.
  json s = {16, 16};
  ts::Function f = make_function(
      {port("x", "float32", s, 0), port("y", "float32", s, 1)},
      {node("a", "aten.mul.Tensor", {"x", "y"}, {}, "float32", s),
       node("c", "aten.exp.default", {"a"}, {}, "float32", s),
       node("s", "aten.sum.default", {"a"}, {{"dtype", nullptr}}, "float32", json::array())},
      {out_port("c", 0, "float32", s), out_port("s", 1, "float32", json::array())});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  ASSERT_EQ(count_op(g, "trainstep.fused_elementwise"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].outputs.size(), 2u);
  expect_same_results(f, g);
}

TEST(FusePass, BroadcastAndOtherShapesStayApart) {
  json s = {4, 3};
  ts::Function f = make_function(
      {port("x", "float32", s, 0), port("b", "float32", {3}, 1), port("z", "float32", {5}, 2)},
      {node("a", "aten.add.Tensor", {"x", "b"}, {{"alpha", 1}}, "float32", s),  // broadcasts
       node("r", "aten.relu.default", {"a"}, {}, "float32", s),
       node("e", "aten.exp.default", {"r"}, {}, "float32", s),
       node("n", "aten.neg.default", {"z"}, {}, "float32", {5}),
       node("m", "aten.abs.default", {"n"}, {}, "float32", {5})},
      {out_port("e", 0, "float32", s), out_port("m", 1, "float32", {5})});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  EXPECT_EQ(count_op(g, "trainstep.fused_elementwise"), 2);  // {r, e} and {n, m}
  EXPECT_EQ(count_op(g, "aten.add.Tensor"), 1);
  expect_same_results(f, g);
}

TEST(FusePass, Float64StaysUnfused) {
  // The fused kernel runs float32 tiles: float64 pointwise nodes keep their
  // own kernels, however fusable their ops are in float32. A float32 chain
  // scaled by a float64 0-d value (a float64 model's LR on a float32
  // parameter) still fuses: one-element inputs are cast as the member
  // kernels would.
  json s = {8, 33};
  ts::Function f = make_function(
      {port("x", "float64", s, 0), port("y", "float64", s, 1), port("z", "float32", s, 2),
       port("lr", "float64", json::array(), 3)},
      {node("a", "aten.mul.Tensor", {"x", "y"}, {}, "float64", s),
       node("b", "aten.add.Tensor", {"a", "y"}, {{"alpha", 1}}, "float64", s),
       node("r", "aten.relu.default", {"b"}, {}, "float64", s),
       node("g", "aten.ge.Scalar", {"r"}, {{"other", 0.5}}, "bool", s),
       node("u", "aten.mul.Tensor", {"lr", "z"}, {}, "float32", s),
       node("e", "aten.exp.default", {"u"}, {}, "float32", s)},
      {out_port("r", 0, "float64", s), out_port("g", 1, "bool", s), out_port("e", 2, "float32", s)});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  EXPECT_EQ(count_op(g, "trainstep.fused_elementwise"), 1);  // {u, e}
  EXPECT_EQ(count_op(g, "aten.mul.Tensor"), 1);
  EXPECT_EQ(count_op(g, "aten.add.Tensor"), 1);
  EXPECT_EQ(count_op(g, "aten.relu.default"), 1);
  EXPECT_EQ(count_op(g, "aten.ge.Scalar"), 1);  // reads a float64 tensor
  expect_same_results(f, g);
}

TEST(FusePass, SharedConstantStaysForOtherReaders) {
  json s = {10};
  ts::Function f = make_function(
      {port("x", "float32", s, 0), port("w", "float32", {2, 5}, 1)},
      {node("c", "trainstep.constant", json::array(), {{"value", 2}, {"dtype", "int64"}, {"wrapped", true}},
            "int64", json::array()),
       node("a", "aten.mul.Tensor", {"x", "c"}, {}, "float32", s),
       node("b", "aten.sqrt.default", {"a"}, {}, "float32", s),
       node("d", "aten.mul.Tensor", {"w", "c"}, {}, "float32", {2, 5})},
      {out_port("b", 0, "float32", s), out_port("d", 1, "float32", {2, 5})});
  ts::Function g = f;
  ts::fuse_elementwise(g);
  EXPECT_EQ(count_op(g, "trainstep.fused_elementwise"), 1);
  EXPECT_EQ(count_op(g, "trainstep.constant"), 1);  // still read by d
  expect_same_results(f, g);
}

}  // namespace

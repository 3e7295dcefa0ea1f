// fuse_batch_norm_groups: a float32 batch norm's activation group runs in
// its forward (trainstep.batch_norm_epilogue) and the backward groups that
// read its output become its backward's prologue
// (trainstep.batch_norm_backward_prologue). The fused program gives the
// bits of the unfused one (fuse_elementwise's groups and batch norm's own
// kernels) at every layout, mode and ISA level; the pass folds only when
// the batch norm's output then disappears; plan_layouts lays the fused
// nodes and their groups' tensors out as it lays out batch norm.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/rewrite.h"
#include "ir/text.h"
#include "isa_levels.h"
#include "passes/fuse_batch_norm_groups.h"
#include "passes/fuse_elementwise.h"
#include "passes/plan_layouts.h"
#include "runtime/executor.h"

using ts::DType;
using ts::HostTensor;
using json = nlohmann::json;

namespace {

const char* kEpi = "trainstep.batch_norm_epilogue";
const char* kPro = "trainstep.batch_norm_backward_prologue";

// x -> batch norm -> hardswish (as torch decomposes it), times a 0-d scale;
// the backward: hardswish's gradient of (g * mask) -> batch norm backward.
// `fwd_extra` / `bwd_extra` add lines; `ret` adds returned values.
// The activations' shape: (4, 16, 40, 40), where a plane and a channel
// block's sample span several tiles, or (64, 16, 7, 7), where a tile spans
// several; channels run in parallel in both.
std::string kShape = "[4, 16, 40, 40]";
ts::Shape kDims = {4, 16, 40, 40};

void set_shape(const ts::Shape& d) {
  kDims = d;
  kShape = "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
           ", " + std::to_string(d[3]) + "]";
}

// dx_read: grad_input is returned (else nothing reads it, and its kernel
// gets no buffer for it).
std::string program(bool train, const std::string& fwd_extra = "", const std::string& ret = "",
                    const std::string& bn_x = "%x", bool dx_read = true) {
  const std::string T = std::string("float32") + kShape;
  std::string s = "func f(%x: " + T + " {role=input}, %gamma: float32[16] {role=input, index=1}, "
                  "%beta: float32[16] {role=input, index=2}, %rm: float32[16] {role=input, index=3}, "
                  "%rv: float32[16] {role=input, index=4}, %g: " + T + " {role=input, index=5}, "
                  "%mask: bool" + std::string(kShape) + " {role=input, index=6}, %scale: float32[] {role=input, index=7}, "
                  "%x2: " + T + " {role=input, index=8}) {\n";
  const std::string bn_attrs = train ? R"({"eps":1e-05,"momentum":0.1,"training":true})"
                                     : R"({"eps":1e-05,"momentum":0.1,"training":false})";
  s += "  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%x, %gamma, %beta, " +
       std::string(train ? "None, None" : "%rm, %rv") + ") " + bn_attrs + "\n";
  s += "  %c3 = trainstep.constant() {\"dtype\":\"int64\",\"value\":3,\"wrapped\":true}\n"
       "  %c6 = trainstep.constant() {\"dtype\":\"int64\",\"value\":6,\"wrapped\":true}\n"
       "  %add = aten.add.Tensor(%bn.0, %c3) {\"alpha\":1}\n"
       "  %cl0 = aten.clamp.default(%add) {\"max\":null,\"min\":0}\n"
       "  %cl6 = aten.clamp.default(%cl0) {\"max\":6,\"min\":null}\n"
       "  %mul = aten.mul.Tensor(%bn.0, %cl6)\n"
       "  %hs = aten.div.Tensor(%mul, %c6)\n"
       "  %a = aten.mul.Tensor(%hs, %scale)\n" + fwd_extra;
  s += "  %gm = aten.mul.Tensor(%g, %mask)\n"
       "  %le = aten.le.Scalar(%bn.0) {\"other\":-3}\n"
       "  %lt = aten.lt.Scalar(%bn.0) {\"other\":3}\n"
       "  %d3 = aten.div.Tensor(%bn.0, %c3)\n"
       "  %half = trainstep.constant() {\"dtype\":\"float64\",\"value\":0.5,\"wrapped\":true}\n"
       "  %ad = aten.add.Tensor(%d3, %half) {\"alpha\":1}\n"
       "  %mg = aten.mul.Tensor(%gm, %ad)\n"
       "  %w4 = aten.where.self(%lt, %mg, %gm)\n"
       "  %zero = trainstep.constant() {\"dtype\":\"float32\",\"value\":0.0}\n"
       "  %gp = aten.where.self(%le, %zero, %w4)\n";
  s += "  %dx, %dw, %db = aten.native_batch_norm_backward.default(%gp, " + bn_x + ", %gamma, " +
       (train ? "None, None, %bn.1, %bn.2" : "%rm, %rv, None, None") + ") {\"eps\":1e-05,\"train\":" +
       (train ? "true" : "false") + ",\"output_mask\":[true,true,true]}\n";
  s += std::string("  return %a {role=output}, %bn.1 {role=output, index=1}, %bn.2 {role=output, index=2}, ") +
       (dx_read ? "%dx" : "%dw") + " {role=output, index=3}, %dw {role=output, index=4}, "
       "%db {role=output, index=5}" + ret + "\n}\n";
  return s;
}

ts::Function grouped(const std::string& text) {
  ts::Function f = ts::parse_function(text);
  ts::fuse_elementwise(f);
  return f;
}

int count_op(const ts::Function& f, const std::string& op) {
  int n = 0;
  for (const ts::Node& m : f.nodes) n += !m.dead && m.op == op;
  return n;
}

// Every rank-4 port of the batch-norm nodes (fused or not) in `layout`, as
// plan_layouts would set them; the groups take any layout.
void set_layouts(ts::Function& f, const std::string& layout) {
  if (layout == "plain") return;
  for (ts::Node& n : f.nodes) {
    const std::string& op = n.op;
    if (op != kEpi && op != kPro && op != "aten.native_batch_norm.default" &&
        op != "aten.native_batch_norm_backward.default")
      continue;
    for (const auto& [key, vals] : {std::pair{"in_layouts", &n.inputs}, std::pair{"out_layouts", &n.outputs}}) {
      json a = json::array();
      for (int v : *vals)
        a.push_back(v >= 0 && f.value_types[v].shape.size() == 4 ? layout : "plain");
      n.attrs[key] = a;
    }
  }
  ts::compact(f);  // re-verifies the layouts against the types
}

std::vector<std::vector<char>> run(const ts::Function& f, const std::vector<HostTensor>& in, int threads) {
  ts::Executor ex(f, threads, true);
  for (size_t i = 0; i < in.size(); ++i) ex.bind_input(static_cast<int>(i), in[i].view.data);
  ex.run();
  std::vector<std::vector<char>> r;
  for (int i = 0; i < static_cast<int>(f.outputs.size()); ++i) {
    const ts::Tensor& t = ex.output(i);
    const char* p = static_cast<const char*>(t.data);
    r.emplace_back(p, p + t.nbytes());
  }
  return r;
}

std::vector<HostTensor> inputs(uint32_t seed) {
  std::mt19937 rng(seed);
  auto fill = [&](DType dt, ts::Shape s, float lo, float hi) {
    HostTensor t(dt, s);
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < t.view.numel(); ++i) {
      if (dt == DType::Bool) t.view.as<bool>()[i] = (rng() & 3) != 0;
      else t.view.as<float>()[i] = d(rng);
    }
    return t;
  };
  std::vector<HostTensor> in;
  in.push_back(fill(DType::F32, kDims, -4.f, 4.f));  // x
  in.push_back(fill(DType::F32, {16}, 0.5f, 2.f));           // gamma
  in.push_back(fill(DType::F32, {16}, -1.f, 1.f));           // beta
  in.push_back(fill(DType::F32, {16}, -1.f, 1.f));           // running mean
  in.push_back(fill(DType::F32, {16}, 0.5f, 2.f));           // running var
  in.push_back(fill(DType::F32, kDims, -1.f, 1.f));  // g
  in.push_back(fill(DType::Bool, kDims, 0, 1));      // mask
  in.push_back(fill(DType::F32, {}, 0.5f, 1.5f));            // scale
  in.push_back(fill(DType::F32, kDims, -1.f, 1.f));  // x2
  // A NaN makes one channel's statistics NaN in training.
  in[0].view.as<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  return in;
}

TEST(FuseBatchNormGroups, FoldsTheActivationAndItsBackward) {
  set_shape({4, 16, 40, 40});
  for (bool train : {true, false}) {
    ts::Function f = grouped(program(train));
    ASSERT_EQ(count_op(f, "trainstep.fused_elementwise"), 2) << ts::print_function(f);
    ts::fuse_batch_norm_groups(f);
    EXPECT_EQ(count_op(f, kEpi), 1) << ts::print_function(f);
    EXPECT_EQ(count_op(f, kPro), 1) << ts::print_function(f);
    EXPECT_EQ(count_op(f, "trainstep.fused_elementwise"), 0) << ts::print_function(f);
    EXPECT_EQ(count_op(f, "aten.native_batch_norm.default"), 0);
  }
}

TEST(FuseBatchNormGroups, KeepsAnOutputSomethingElseReads) {
  set_shape({4, 16, 40, 40});
  // y returned; y read by a non-pointwise op; the gradient read twice; a
  // backward over another x; the forward group reading a full-size input.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ", %bn.0 {role=output, index=6}"},
      {"  %sm = aten._softmax.default(%bn.0) {\"dim\":1,\"half_to_float\":false}\n",
       ", %sm {role=output, index=6}"},
      {"", ", %gp {role=output, index=6}"},
      {"  %a2 = aten.mul.Tensor(%hs, %x2)\n", ", %a2 {role=output, index=6}"}};
  for (const auto& [extra, ret] : cases) {
    ts::Function f = grouped(program(true, extra, ret));
    const std::string before = ts::print_function(f);
    ts::fuse_batch_norm_groups(f);
    EXPECT_EQ(ts::print_function(f), before) << extra << ret;
  }
  ts::Function other = grouped(program(true, "", "", "%x2"));
  ts::fuse_batch_norm_groups(other);
  EXPECT_EQ(count_op(other, kEpi) + count_op(other, kPro), 0) << ts::print_function(other);
}

// The fused program against the unfused one, bit for bit: activation, saves,
// grad_input, grad_weight, grad_bias.
TEST(BatchNormGroups, GiveTheUnfusedBits) {
  struct Case {
    ts::Shape dims;
    bool dx_read;
  };
  const Case cases[] = {{{4, 16, 40, 40}, true}, {{64, 16, 7, 7}, true}, {{64, 16, 7, 7}, false}};
  isatest::for_each_isa([&](ts::CpuIsa) {
    for (const Case& cs : cases)
    for (const char* layout : {"plain", "nChw8c", "nChw16c"})
      for (bool train : {true, false})
        for (int threads : {1, 2}) {
          set_shape(cs.dims);
          SCOPED_TRACE(kShape + (cs.dx_read ? "" : " no dx ") + layout + (train ? " train" : " eval") +
                       " threads " + std::to_string(threads));
          ts::Function plain = grouped(program(train, "", "", "%x", cs.dx_read));
          ts::Function fused = plain;
          ts::fuse_batch_norm_groups(fused);
          ASSERT_EQ(count_op(fused, kEpi), 1);
          set_layouts(plain, layout);
          set_layouts(fused, layout);
          const auto in = inputs(7 + train);
          const auto want = run(plain, in, threads), got = run(fused, in, threads);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < want.size(); ++i) {
            SCOPED_TRACE("output " + std::to_string(i));
            EXPECT_EQ(got[i], want[i]);
          }
        }
  });
}

// After the fold, plan_layouts blocks the fused nodes' activations and their
// groups' full-size tensors as it blocks batch norm's; one-element ones stay
// plain.
TEST(BatchNormGroups, PlanLayoutsBlocksTheFusedNodes) {
  const std::string conv =
      R"({"dilation":[1,1],"groups":1,"output_padding":[0,0],"padding":[0,0],"stride":[1,1],"transposed":false})";
  const std::string T = "float32[2, 16, 4, 4]";
  const std::string text =
      "func f(%in: " + T + " {role=input}, %w: float32[16, 16, 1, 1] {role=input, index=1}, "
      "%gamma: float32[16] {role=input, index=2}, %beta: float32[16] {role=input, index=3}, "
      "%gin: " + T + " {role=input, index=4}, %scale: float32[] {role=input, index=5}) {\n"
      "  %x = aten.convolution.default(%in, %w, None) " + conv + "\n"
      "  %bn.0, %bn.1, %bn.2 = aten.native_batch_norm.default(%x, %gamma, %beta, None, None) "
      "{\"eps\":1e-05,\"momentum\":0.1,\"training\":true}\n"
      "  %s = aten.sigmoid.default(%bn.0)\n"
      "  %a = aten.mul.Tensor(%bn.0, %s)\n"
      "  %as = aten.mul.Tensor(%a, %scale)\n"
      "  %o = aten.convolution.default(%as, %w, None) " + conv + "\n"
      "  %g = aten.convolution.default(%gin, %w, None) " + conv + "\n"
      "  %s2 = aten.sigmoid.default(%bn.0)\n"
      "  %gs = aten.mul.Tensor(%g, %s2)\n"
      "  %dx, %dw, %db = aten.native_batch_norm_backward.default(%gs, %x, %gamma, None, None, %bn.1, %bn.2) "
      "{\"eps\":1e-05,\"train\":true,\"output_mask\":[true,true,true]}\n"
      "  %o2 = aten.convolution.default(%dx, %w, None) " + conv + "\n"
      "  return %o {role=output}, %o2 {role=output, index=1}, %dw {role=output, index=2}, "
      "%db {role=output, index=3}\n}\n";
  ts::Function f = grouped(text);
  ts::fuse_batch_norm_groups(f);
  ts::plan_layouts(f, 16, false);
  const ts::Node *epi = nullptr, *pro = nullptr;
  for (const ts::Node& n : f.nodes) {
    if (n.dead) continue;
    if (n.op == kEpi) epi = &n;
    if (n.op == kPro) pro = &n;
  }
  ASSERT_NE(epi, nullptr) << ts::print_function(f);
  ASSERT_NE(pro, nullptr) << ts::print_function(f);
  auto layout = [&](const ts::Node& n, const char* key, int i) {
    return n.attrs.contains(key) && i < static_cast<int>(n.attrs[key].size())
               ? n.attrs[key][i].get<std::string>() : std::string("plain");
  };
  const std::string P = ts::print_function(f);
  EXPECT_EQ(layout(*epi, "in_layouts", 0), "nChw16c") << P;
  for (size_t i = 5; i < epi->inputs.size(); ++i) {
    const bool big = f.value_types[epi->inputs[i]].numel() > 1;
    EXPECT_EQ(layout(*epi, "in_layouts", static_cast<int>(i)), big ? "nChw16c" : "plain") << P;
  }
  EXPECT_EQ(layout(*epi, "out_layouts", 3), "nChw16c") << P;  // the activation
  EXPECT_EQ(layout(*epi, "out_layouts", 0), "plain") << P;    // coeffs
  EXPECT_EQ(layout(*pro, "in_layouts", 1), "nChw16c") << P;
  EXPECT_EQ(layout(*pro, "in_layouts", 7), "nChw16c") << P;   // g
  EXPECT_EQ(layout(*pro, "out_layouts", 0), "nChw16c") << P;
}

}  // namespace

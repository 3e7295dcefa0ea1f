// A tiny hand-built artifact for API tests, and JSON helpers to build
// programs by hand (docs/format.md).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "trainstep/tensor.h"

namespace ts_test {

using json = nlohmann::json;

inline json port(const char* name, const char* role, const char* dtype, json shape, json extra = {}) {
  json p = {{"name", name}, {"role", role}, {"dtype", dtype}, {"shape", shape}};
  for (auto& [k, v] : extra.items()) p[k] = v;
  return p;
}

inline json node(const char* name, const char* op, json inputs, json attrs, const char* dtype, json shape) {
  return {{"name", name}, {"op", op}, {"inputs", inputs}, {"attrs", attrs},
          {"outputs", {name}}, {"types", {{{"dtype", dtype}, {"shape", shape}}}}};
}

// Toy grad_step / apply_step for the tiny artifact: "gradient" = w * loss,
// update w' = w - lr * grad (only the API's bookkeeping matters).
inline void add_grad_functions(json& program, const std::string& sw, const char* state_name) {
  json grad = {
      {"inputs",
       {port(sw.c_str(), "state", "float32", {4, 3}, {{"state", state_name}}),
        port("rng_seed", "rng_seed", "int64", json::array()),
        port("rng_offset", "rng_offset", "int64", json::array()),
        port("input0", "input", "float32", {2, 4}, {{"index", 0}}),
        port("target", "target", "int64", {2})}},
      {"nodes",
       {node("mm", "aten.mm.default", {"input0", sw}, json::object(), "float32", {2, 3}),
        node("mean", "aten.mean.default", {"mm"}, {{"dtype", nullptr}}, "float32", json::array()),
        node("g", "aten.mul.Tensor", {sw, "mean"}, json::object(), "float32", {4, 3})}},
      {"outputs",
       {{{"value", "mean"}, {"role", "loss"}, {"dtype", "float32"}, {"shape", json::array()}},
        {{"value", "g"}, {"role", "grad"}, {"state", state_name}, {"dtype", "float32"},
         {"shape", {4, 3}}}}}};
  std::string gw = std::string("grad/") + state_name;
  json apply = {
      {"inputs",
       {port(sw.c_str(), "state", "float32", {4, 3}, {{"state", state_name}}),
        port("lr", "lr", "float32", json::array()),
        port(gw.c_str(), "grad", "float32", {4, 3}, {{"state", state_name}})}},
      {"nodes",
       {node("m", "aten.mul.Tensor", {gw, "lr"}, json::object(), "float32", {4, 3}),
        node("w2", "aten.sub.Tensor", {sw, "m"}, {{"alpha", 1}}, "float32", {4, 3})}},
      {"outputs",
       {{{"value", "w2"}, {"role", "state"}, {"state", state_name}, {"dtype", "float32"},
         {"shape", {4, 3}}}}}};
  program["functions"]["grad_step"] = grad;
  program["functions"]["apply_step"] = apply;
}

// y = x @ w; loss = mean(y); w' = w - lr (a toy update: only the API matters).
// grads: add grad_step/apply_step; alias: a second state_dict name of w.
// `edit` may change the program before it is written.
inline std::string write_tiny_artifact(const std::string& dir, const char* state_name = "w",
                                       bool grads = false, const char* alias = nullptr,
                                       const std::function<void(json&)>& edit = nullptr) {
  std::string sw = std::string("state/") + state_name;
  json train = {
      {"inputs",
       {port(sw.c_str(), "state", "float32", {4, 3}, {{"state", state_name}}),
        port("lr", "lr", "float32", json::array()), port("rng_seed", "rng_seed", "int64", json::array()),
        port("rng_offset", "rng_offset", "int64", json::array()),
        port("input0", "input", "float32", {2, 4}, {{"index", 0}}),
        port("target", "target", "int64", {2})}},
      {"nodes",
       {node("mm", "aten.mm.default", {"input0", sw}, json::object(), "float32", {2, 3}),
        node("mean", "aten.mean.default", {"mm"}, {{"dtype", nullptr}}, "float32", json::array()),
        node("w2", "aten.sub.Tensor", {sw, "lr"}, {{"alpha", 1}}, "float32", {4, 3})}},
      {"outputs",
       {{{"value", "mean"}, {"role", "loss"}, {"dtype", "float32"}, {"shape", json::array()}},
        {{"value", "w2"}, {"role", "state"}, {"state", state_name}, {"dtype", "float32"},
         {"shape", {4, 3}}}}}};
  json eval = {
      {"inputs",
       {port(sw.c_str(), "state", "float32", {4, 3}, {{"state", state_name}}),
        port("input0", "input", "float32", {2, 4}, {{"index", 0}}),
        port("target", "target", "int64", {2})}},
      {"nodes",
       {node("mm", "aten.mm.default", {"input0", sw}, json::object(), "float32", {2, 3}),
        node("sl", "aten.sum.dim_IntList", {"mm"}, {{"dim", {1}}, {"keepdim", false}, {"dtype", nullptr}},
             "float32", {2})}},
      {"outputs",
       {{{"value", "mm"}, {"role", "output"}, {"index", 0}, {"dtype", "float32"}, {"shape", {2, 3}}},
        {{"value", "sl"}, {"role", "sample_loss"}, {"dtype", "float32"}, {"shape", {2}}}}}};
  json program = {{"format", "trainstep"}, {"version", 1}, {"name", "tiny"}, {"batch_size", 2},
                  {"optimizer", {{"type", "SGD"}, {"lr", 0.5}}},
                  {"state", {{{"name", state_name}, {"kind", "param"}, {"dtype", "float32"},
                              {"shape", {4, 3}}}}},
                  {"functions", {{"train_step", train}, {"eval_step", eval}}}};
  if (grads) add_grad_functions(program, sw, state_name);
  if (alias) program["aliases"] = {{alias, state_name}};
  if (edit) edit(program);
  ts::HostTensor w(ts::DType::F32, {4, 3});
  for (int i = 0; i < 12; ++i) w.view.as<float>()[i] = 0.1f * i;
  std::string path = dir + "/tiny_" + state_name + (grads ? "_g" : "") + (alias ? "_a" : "") +
                     ".tstep";
  ts::write_safetensors(path, {{"format", "trainstep"}, {"format_version", "1"},
                               {"program", program.dump()}},
                        {{sw, &w.view}});
  return path;
}

}  // namespace ts_test

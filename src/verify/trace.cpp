#include "verify/trace.h"

#include <cstdio>

#include "ir/program.h"
#include "runtime/executor.h"
#include "trainstep/error.h"
#include "verify/diff.h"

namespace ts {

TraceReport trace_step0(const Artifact& a, double tol, int threads,
                        const std::function<void(const TraceMismatch&)>& on_mismatch) {
  const std::string prefix = "trace/train_step/";
  bool any = false;
  for (const auto& [name, t] : a.tensors.tensors) any |= name.rfind(prefix, 0) == 0;
  if (!any) fail(a.path + ": the artifact has no recorded trace (export it with --trace-values)");
  const json& g = a.program.golden;
  const Function& f = a.program.function("train_step");
  Executor ex(f, threads, false);
  double lr64 = g.value("lr", 0.0);  // the lr port is float64 for float64 models
  float lr32 = static_cast<float>(lr64);
  int64_t seed = g.value("seed", int64_t(0)), offset = g.value("offset", int64_t(0));
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& p = f.inputs[i];
    void* data = nullptr;
    if (p.role == Role::Input || p.role == Role::Target) continue;  // the batch, below
    if (p.role == Role::State) data = a.tensor("state/" + p.state).view.data;
    else if (p.role == Role::Lr) data = p.type.dtype == DType::F64 ? static_cast<void*>(&lr64) : &lr32;
    else if (p.role == Role::RngSeed) data = &seed;
    else if (p.role == Role::RngOffset) data = &offset;
    else fail(a.path + ": train_step input '" + p.name + "' has role '" + role_name(p.role) +
              "', which a train_step does not take");
    ex.bind_input(static_cast<int>(i), data);
  }
  // golden_batch lists each role's tensors in inputs_of's port order.
  const Artifact::Batch b0 = a.golden_batch(0);
  const std::vector<int> in_slots = f.inputs_of(Role::Input);
  const std::vector<int> target_slots = f.inputs_of(Role::Target);
  for (size_t k = 0; k < in_slots.size(); ++k) ex.bind_input(in_slots[k], b0.inputs[k].data);
  for (size_t k = 0; k < target_slots.size(); ++k) ex.bind_input(target_slots[k], b0.targets[k].data);
  TraceReport r;
  ex.set_observer([&](const Node& n, const std::vector<const Tensor*>& outs) {
    for (size_t k = 0; k < outs.size(); ++k) {
      if (n.outputs[k] < 0 || !outs[k]) continue;
      const std::string& v = f.value_names[n.outputs[k]];
      const HostTensor* want = a.tensors.find(prefix + v);
      if (!want) {
        r.unrecorded += n.op != "trainstep.constant";  // the exporter's own constants are not traced
        continue;
      }
      ++r.compared;
      const std::string what = "node '" + n.name + "' (" + n.op + ") value '" + v + "'";
      bool ok;
      char line[256];
      if (outs[k]->type() != want->view.type()) {
        ok = false;
        std::snprintf(line, sizeof line, "is %s, recorded %s", outs[k]->type().str().c_str(),
                      want->view.type().str().c_str());
      } else {
        Diff d = compare(*outs[k], want->view, what);
        ok = within(d, tol);
        std::snprintf(line, sizeof line, "max_abs %.3e  of_scale %.3e", d.max_abs, of_scale(d));
      }
      if (ok) continue;
      r.mismatches.push_back({n.name, n.op, v, what + ": " + line});
      if (on_mismatch) on_mismatch(r.mismatches.back());
    }
  });
  ex.run();
  return r;
}

}  // namespace ts

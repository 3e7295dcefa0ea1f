#include "passes/split_train_step.h"

#include <utility>

#include "ir/rewrite.h"

namespace ts {

namespace {

// What a train_step port carries for the cut: "param", "optim" (the LR
// too: only the update reads it), or "" (the batch, the RNG, buffers,
// frozen state, the loss).
std::string kind_of(const Program& p, const Port& q) {
  if (q.role == Role::Lr) return "optim";
  const StateSpec* s = q.role == Role::State ? p.find_state(q.state) : nullptr;
  return s && (s->kind == "param" || s->kind == "optim") ? s->kind : "";
}

std::string describe(const Function& f, int v) {
  for (const Port& q : f.inputs)
    if (q.value == v) return "step input '" + q.name + "' (role " + role_name(q.role) + ")";
  return "'" + f.value_names[v] + "'";
}

// Marks the nodes the `roots` need, walking back through producers; stops
// at `stop` values. A function input that `allowed` lacks fails through
// `refuse(root index, value, reading node)`.
template <class Refuse>
std::vector<bool> cone(const Function& f, const std::vector<int>& roots,
                       const std::vector<bool>& stop, const std::vector<bool>& allowed,
                       Refuse refuse) {
  std::vector<bool> need(f.nodes.size(), false), seen(f.value_names.size(), false);
  std::vector<std::pair<int, int>> todo;  // (value, node that reads it; -1 a root)
  for (size_t r = 0; r < roots.size(); ++r) {
    todo.emplace_back(roots[r], -1);
    while (!todo.empty()) {
      auto [v, via] = todo.back();
      todo.pop_back();
      if (v < 0 || seen[v] || stop[v]) continue;
      seen[v] = true;
      const int n = f.producer[v];
      if (n < 0) {
        if (!allowed[v]) refuse(r, v, via);
        continue;
      }
      if (need[n]) continue;
      need[n] = true;
      for (int u : f.nodes[n].inputs) todo.emplace_back(u, n);
    }
  }
  return need;
}

// A function of f's `need` nodes, in f's order, with the given ports
// (their values are f's ids; an input's value takes the port's name).
Function build(const Function& f, const std::string& name, const std::vector<bool>& need,
               const std::vector<Port>& ins, const std::vector<Port>& outs) {
  Function g;
  g.name = name;
  std::vector<int> map(f.value_names.size(), -1);
  for (Port q : ins) {
    const int v = q.value;
    q.value = add_value(g, q.name, f.value_types[v]);
    map[v] = q.value;
    g.inputs.push_back(q);
  }
  copy_nodes(f, need, g, map);
  for (Port q : outs) {
    q.value = map[q.value];
    g.outputs.push_back(q);
  }
  compact(g);  // producers, and every type inferred again
  return g;
}

}  // namespace

SplitSteps split_train_step(const Program& p, const std::string& what) {
  const Function& f = p.function("train_step");
  const std::string where = what + ": deriving grad_step and apply_step from train_step";
  if (f.grads.empty())
    fail(where + ": the artifact names no gradients in train_step (it predates trainstep "
                 "doing so); export it again, or export it with --grads");

  // Parameters are read on both sides; optimizer state and the LR only by
  // the update. apply_step's inputs are ordered as the exporter orders
  // them: parameters, optimizer state, LR, gradients.
  const size_t nv = f.value_names.size();
  std::vector<bool> grad_ok(nv, false), apply_ok(nv, false), is_grad(nv, false);
  std::vector<Port> grad_ins, apply_ins, grad_outs, apply_outs;
  for (const char* kind : {"param", "optim"})
    for (const Port& q : f.inputs)
      if (kind_of(p, q) == kind) apply_ins.push_back(q);
  for (const Port& q : f.inputs) {
    const std::string kind = kind_of(p, q);
    apply_ok[q.value] = !kind.empty();
    grad_ok[q.value] = kind != "optim";
    if (grad_ok[q.value]) grad_ins.push_back(q);
  }
  for (const Port& g : f.grads) {
    Port q = g;
    q.name = "grad/" + g.state;
    apply_ins.push_back(q);
    is_grad[g.value] = true;
  }
  for (const Port& q : f.outputs) (kind_of(p, q).empty() ? grad_outs : apply_outs).push_back(q);
  grad_outs.insert(grad_outs.end(), f.grads.begin(), f.grads.end());

  auto values = [](const std::vector<Port>& ports) {
    std::vector<int> v;
    for (const Port& q : ports) v.push_back(q.value);
    return v;
  };
  auto out_name = [](const Port& q) {
    return q.role == Role::State || q.role == Role::Grad
               ? std::string(role_name(q.role)) + " '" + q.state + "'"
               : std::string(role_name(q.role));
  };
  const std::vector<bool> no_stop(nv, false);
  std::vector<bool> grad_need = cone(f, values(grad_outs), no_stop, grad_ok,
                                     [&](size_t r, int v, int via) {
    fail(where + ": the " + out_name(grad_outs[r]) + " reads the " + describe(f, v) +
         (via >= 0 ? " (node '" + f.nodes[via].name + "')" : std::string()) +
         ", which only the update should");
  });
  std::vector<bool> apply_need = cone(f, values(apply_outs), is_grad, apply_ok,
                                      [&](size_t r, int v, int via) {
    fail(where + ": the new " + out_name(apply_outs[r]) + " reads the " + describe(f, v) +
         (via >= 0 ? " (node '" + f.nodes[via].name + "')" : std::string()) +
         ": an update must read only the parameters, the optimizer state, the LR and the "
         "gradients to be split from the step");
  });

  SplitSteps r;
  try {
    r.grad = build(f, "grad_step", grad_need, grad_ins, grad_outs);
    r.apply = build(f, "apply_step", apply_need, apply_ins, apply_outs);
  } catch (const Error& e) {
    fail(where + ": " + e.what());
  }
  return r;
}

}  // namespace ts

#include "passes/data_parallel.h"

#include <algorithm>
#include <map>

#include "ir/rewrite.h"

namespace ts {

std::vector<GradBucket> grad_buckets(const Function& grad, const BucketOptions& o) {
  std::vector<const Port*> grads;
  for (const Port& p : grad.outputs)
    if (p.role == Role::Grad) grads.push_back(&p);
  std::reverse(grads.begin(), grads.end());
  std::vector<GradBucket> out;
  DType dtype = DType::F32;
  bool open = false;
  for (const Port* p : grads) {
    if (open && p->type.dtype != dtype) open = false;  // one dtype per bucket
    if (!open) {
      out.emplace_back();
      dtype = p->type.dtype;
      open = true;
    }
    out.back().params.push_back(p->state);
    out.back().bytes += p->type.nbytes();
    const size_t cap = out.size() == 1 ? o.first_bytes : o.cap_bytes;
    if (out.back().bytes >= cap) open = false;
  }
  return out;
}

namespace {

// Copies function `src`'s nodes and values into `dst`, value ids mapped by
// `map` (src id -> dst id; -1 entries get a new value named prefix + name).
void copy_body(const Function& src, Function& dst, std::vector<int>& map,
               const std::string& prefix) {
  for (size_t v = 0; v < src.value_names.size(); ++v)
    if (map[v] < 0) map[v] = add_value(dst, prefix + src.value_names[v], src.value_types[v]);
  for (const Node& n : src.nodes) {
    Node m = n;
    m.name = prefix + n.name;
    for (int& v : m.inputs) v = v < 0 ? -1 : map[v];
    for (int& v : m.outputs) v = v < 0 ? -1 : map[v];
    dst.nodes.push_back(std::move(m));
  }
}

}  // namespace

Function data_parallel_step(const Function& grad, const Function& full_apply,
                            const BucketOptions& o, const std::string& what,
                            const ShardPlan* shard, int rank) {
  const std::string where = what + ": the data-parallel step";
  const Function sharded = shard ? shard_apply(full_apply, *shard, rank, o, what) : Function();
  const Function& apply = shard ? sharded : full_apply;
  // Each rank gets only the gradients it updates with.
  const bool scatter = shard && shard->reads_all_grads.empty();
  Function f;
  f.name = "train_step";
  // grad_step's inputs as they are; apply_step's join them by role (and
  // state name), gradients excepted: those become the all-reduce's results.
  std::vector<int> gmap(grad.value_names.size(), -1), amap(apply.value_names.size(), -1);
  for (const Port& p : grad.inputs) {
    Port q = p;
    q.value = add_value(f, grad.value_names[p.value], grad.value_types[p.value]);
    gmap[p.value] = q.value;
    f.inputs.push_back(q);
  }
  for (const Port& p : apply.inputs) {
    if (p.role == Role::Grad) continue;
    const int i = f.find_input(p.role, p.state);
    if (i >= 0 && (p.role == Role::State || p.role == Role::Lr || p.role == Role::RngSeed ||
                   p.role == Role::RngOffset)) {
      if (f.inputs[i].type != p.type)
        fail(where + ": apply_step's input '" + p.name + "' is " + p.type.str() +
             ", grad_step's " + f.inputs[i].type.str());
      amap[p.value] = f.inputs[i].value;
      continue;
    }
    Port q = p;
    q.name = i >= 0 ? "apply/" + p.name : p.name;
    q.value = add_value(f, q.name, apply.value_types[p.value]);
    amap[p.value] = q.value;
    f.inputs.push_back(q);
  }

  copy_body(grad, f, gmap, "");

  // Where each gradient is made (node index in f, -1: an input).
  std::map<std::string, const Port*> grad_out;
  for (const Port& p : grad.outputs)
    if (p.role == Role::Grad) grad_out[p.state] = &p;
  for (const Port& p : apply.inputs)
    if (p.role == Role::Grad && !grad_out.count(p.state))
      fail(where + ": apply_step takes the gradient of '" + p.state +
           "', which grad_step does not make");
  std::vector<int> made_at(f.value_names.size(), -1);
  for (size_t i = 0; i < f.nodes.size(); ++i)
    for (int v : f.nodes[i].outputs)
      if (v >= 0) made_at[v] = static_cast<int>(i);

  // Starts go right after their last gradient; waits after the backward.
  std::vector<GradBucket> buckets = grad_buckets(grad, o);
  std::vector<std::pair<int, Node>> starts;  // (insert after node index, node)
  std::vector<Node> waits;
  std::map<std::string, int> reduced;  // param -> averaged gradient value in f
  for (size_t b = 0; b < buckets.size(); ++b) {
    const std::string name = (scatter ? "reduce_scatter_" : "all_reduce_") + std::to_string(b);
    std::vector<std::string>& params = buckets[b].params;
    json counts = json::array();
    if (scatter) {  // each rank's chunk: the gradients it updates with
      std::map<std::string, int64_t> numel;
      for (const std::string& p : params) numel[p] = grad_out.at(p)->type.numel();
      counts = chunk_counts(*shard, params, numel);
    }
    Node s, w;
    s.name = name + "/start";
    s.op = scatter ? "trainstep.reduce_scatter_start" : "trainstep.all_reduce_start";
    s.attrs = json::object();
    s.attrs["overlap"] = o.overlap;
    w.name = name + "/wait";
    w.op = scatter ? "trainstep.reduce_scatter_wait" : "trainstep.all_reduce_wait";
    w.attrs = json::object();
    w.attrs["shapes"] = json::array();
    if (scatter) {
      s.attrs["counts"] = w.attrs["counts"] = counts;
      s.attrs["rank"] = w.attrs["rank"] = rank;
    }
    int after = -1;
    int64_t numel = 0;
    DType dt = DType::F32;
    for (const std::string& param : params) {
      const Port* p = grad_out.at(param);
      const int v = gmap[p->value];
      s.inputs.push_back(v);
      after = std::max(after, made_at[v]);
      numel += p->type.numel();
      dt = p->type.dtype;
      if (scatter && shard->owner(param) != rank) continue;
      w.attrs["shapes"].push_back(p->type.shape);
      const int r = add_value(f, "grad_avg/" + param, p->type);
      w.outputs.push_back(r);
      w.declared.push_back(p->type);
      reduced[param] = r;
    }
    const int bucket = add_value(f, name + "/bucket", TensorType{dt, {numel}});
    const int req = add_value(f, name + "/request", TensorType{DType::I64, {}});
    s.outputs = {bucket, req};
    s.declared = {f.value_types[bucket], f.value_types[req]};
    w.inputs = {bucket, req};
    starts.emplace_back(after, std::move(s));
    waits.push_back(std::move(w));  // even with no outputs: it keeps the bucket alive
  }
  // Insert the starts (stable: in bucket order at equal positions).
  std::vector<Node> nodes;
  nodes.reserve(f.nodes.size() + starts.size() + waits.size() + apply.nodes.size());
  for (const auto& [after, s] : starts)
    if (after < 0) nodes.push_back(s);
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    nodes.push_back(std::move(f.nodes[i]));
    for (const auto& [after, s] : starts)
      if (after == static_cast<int>(i)) nodes.push_back(s);
  }
  for (Node& w : waits) nodes.push_back(std::move(w));
  f.nodes = std::move(nodes);

  for (const Port& p : apply.inputs)
    if (p.role == Role::Grad) amap[p.value] = reduced.at(p.state);
  copy_body(apply, f, amap, "apply/");

  // Outputs: grad_step's loss and new buffers, apply_step's new state.
  for (const Port& p : grad.outputs) {
    if (p.role == Role::Grad) continue;
    Port q = p;
    q.value = gmap[p.value];
    f.outputs.push_back(q);
  }
  for (const Port& p : apply.outputs) {
    if (p.role == Role::State && f.find_output(Role::State, p.state) >= 0)
      fail(where + ": both grad_step and apply_step make new '" + p.state + "'");
    Port q = p;
    q.value = amap[p.value];
    f.outputs.push_back(q);
  }
  if (shard) chain_collectives(f);
  try {
    compact(f);  // producers, and every type checked again
  } catch (const Error& e) {
    fail(where + ": " + e.what());
  }
  return f;
}

}  // namespace ts

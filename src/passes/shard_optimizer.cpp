#include "passes/shard_optimizer.h"

#include <algorithm>
#include <set>

#include "ir/rewrite.h"
#include "ops/op.h"

namespace ts {

namespace {

// The input ports (indices into f.inputs) that value v is computed from.
std::vector<int> inputs_read(const Function& f, int v) {
  const std::vector<bool> seen = values_reaching(f, {v});
  std::vector<int> r;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (seen[f.inputs[i].value]) r.push_back(int(i));
  return r;
}

struct Groups {  // union-find over state names
  std::map<std::string, std::string> up;
  std::string find(const std::string& s) {
    auto it = up.find(s);
    if (it == up.end() || it->second == s) return up[s] = s;
    return it->second = find(it->second);
  }
  void join(const std::string& a, const std::string& b) { up[find(a)] = find(b); }
};

}  // namespace

ShardPlan plan_shards(const Function& apply, int ranks, const std::string& what) {
  const Function& f = apply;
  const std::string where = what + ": --shard-optimizer";
  ShardPlan plan;
  plan.ranks = ranks;
  std::set<std::string> params;
  for (const Port& q : f.inputs)
    if (q.role == Role::Grad) params.insert(q.state);
  std::map<std::string, std::vector<int>> reads;  // new state -> inputs it reads
  std::vector<std::string> order;                 // states, in output order
  for (const Port& q : f.outputs)
    if (q.role == Role::State) {
      reads[q.state] = inputs_read(f, q.value);
      order.push_back(q.state);
    }
  auto is_optim = [&](const Port& q) { return q.role == Role::State && !params.count(q.state); };
  // Shared: optimizer state whose update reads no parameter and no
  // gradient (a step count), or that nothing updates.
  std::set<std::string> shared;
  for (const Port& q : f.inputs) {
    if (!is_optim(q)) continue;
    auto it = reads.find(q.state);
    bool reads_params = false;
    if (it != reads.end())
      for (int i : it->second)
        reads_params = reads_params || f.inputs[i].role == Role::Grad ||
                       params.count(f.inputs[i].state) > 0;
    if (!reads_params) shared.insert(q.state);
  }
  // A state goes with every update that reads it.
  Groups g;
  for (const std::string& s : order) {
    g.find(s);
    if (shared.count(s)) continue;
    for (int i : reads[s])
      if (is_optim(f.inputs[i]) && !shared.count(f.inputs[i].state)) g.join(s, f.inputs[i].state);
  }
  // State read by no parameter's update goes with the one parameter whose
  // gradient it reads; reading several, every rank keeps it.
  std::map<std::string, bool> has_param;
  for (const std::string& p : params) has_param[g.find(p)] = true;
  for (const std::string& s : order) {
    if (params.count(s) || shared.count(s) || has_param[g.find(s)]) continue;
    std::set<std::string> of;
    for (int i : reads[s])
      if (f.inputs[i].role == Role::Grad) of.insert(f.inputs[i].state);
    if (of.size() == 1) g.join(s, *of.begin());
    else shared.insert(s);
  }

  // Deal the groups out, largest first, each to the lightest rank.
  std::map<std::string, size_t> bytes;
  std::map<std::string, size_t> first;
  std::vector<std::string> members;
  for (const Port& q : f.inputs)
    if (q.role == Role::State && !shared.count(q.state)) members.push_back(q.state);
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string root = g.find(members[i]);
    const int in = f.find_input(Role::State, members[i]);
    bytes[root] += f.inputs[in].type.nbytes();
    if (!first.count(root)) first[root] = i;
  }
  std::vector<std::string> roots;
  for (const auto& [r, b] : bytes)
    if (has_param[r]) roots.push_back(r);
  std::sort(roots.begin(), roots.end(), [&](const std::string& a, const std::string& b) {
    return bytes[a] != bytes[b] ? bytes[a] > bytes[b] : first[a] < first[b];
  });
  std::vector<size_t> load(size_t(ranks), 0);
  std::map<std::string, int> rank_of;
  for (const std::string& r : roots) {
    const int k = int(std::min_element(load.begin(), load.end()) - load.begin());
    rank_of[r] = k;
    load[size_t(k)] += bytes[r];
  }
  for (const std::string& s : members) {
    auto it = rank_of.find(g.find(s));
    if (it == rank_of.end()) continue;  // optimizer state of no parameter's group
    if (params.count(s)) plan.param_owner[s] = it->second;
    else plan.state_owner[s] = it->second;
  }
  for (const std::string& p : params)
    if (!plan.param_owner.count(p))
      fail(where + ": apply_step takes the gradient of '" + p + "' but does not update it");

  // What each update reads from other ranks.
  for (const std::string& s : order) {
    const bool param = params.count(s) > 0;
    const int own = param ? plan.param_owner.at(s)
                          : plan.state_owner.count(s) ? plan.state_owner.at(s) : -1;
    for (int i : reads[s]) {
      const Port& in = f.inputs[i];
      if (in.role == Role::Grad && plan.reads_all_grads.empty() &&
          (own < 0 ? plan.param_owner.size() > 0 : plan.param_owner.at(in.state) != own))
        plan.reads_all_grads = "the update of '" + s + "' reads the gradient of '" + in.state + "'";
      if (is_optim(in) && plan.state_owner.count(in.state) &&
          (own < 0 || plan.state_owner.at(in.state) != own))
        fail(where + ": the update of '" + s + "' reads optimizer state '" + in.state +
             "', which goes with the update of other parameters");
    }
  }
  return plan;
}

Function shard_apply(const Function& apply, const ShardPlan& plan, int rank,
                     const BucketOptions& o, const std::string& what) {
  const Function& f = apply;
  auto is_param = [&](const std::string& s) { return plan.param_owner.count(s) > 0; };
  // The nodes this rank's updates need.
  std::vector<int> roots;
  for (const Port& q : f.outputs)
    if (q.role == Role::State &&
        (is_param(q.state) ? plan.owner(q.state) == rank : plan.holds(q.state, rank)))
      roots.push_back(q.value);
  const std::vector<bool> seen = values_reaching(f, roots);
  std::vector<bool> need(f.nodes.size(), false);
  for (size_t v = 0; v < seen.size(); ++v)
    if (seen[v] && f.producer[v] >= 0) need[f.producer[v]] = true;

  Function g;
  g.name = f.name;
  std::vector<int> map(f.value_names.size(), -1);
  // Every parameter stays an input (its new value is an output), read or not.
  for (const Port& q : f.inputs) {
    if (!seen[q.value] && !(q.role == Role::State && is_param(q.state))) continue;
    if (q.role == Role::State && !plan.holds(q.state, rank))
      fail(what + ": --shard-optimizer: rank " + std::to_string(rank) +
           "'s update reads optimizer state '" + q.state + "', which another rank holds");
    Port p = q;
    p.value = map[q.value] = add_value(g, f.value_names[q.value], f.value_types[q.value]);
    g.inputs.push_back(p);
  }
  copy_nodes(f, need, g, map);

  // All-gather the new parameters, bucket by bucket (in parameter order, one
  // dtype each), each bucket's parameters ordered by the rank that owns them.
  std::map<std::string, const Port*> new_param;
  std::map<std::string, int64_t> numel;
  std::vector<std::vector<std::string>> buckets;
  size_t filled = 0;
  for (const Port& q : f.outputs) {
    if (q.role != Role::State || !is_param(q.state)) continue;
    if (buckets.empty() || filled >= o.cap_bytes ||
        new_param.at(buckets.back().front())->type.dtype != q.type.dtype) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(q.state);
    new_param[q.state] = &q;
    numel[q.state] = q.type.numel();
    filled += q.type.nbytes();
  }
  std::map<std::string, int> gathered;  // param -> its new value in g, from the wait
  for (size_t b = 0; b < buckets.size(); ++b) {
    const json counts = chunk_counts(plan, buckets[b], numel);
    const std::string name = "all_gather_" + std::to_string(b);
    const DType dt = new_param.at(buckets[b].front())->type.dtype;
    Node s, w;
    s.name = name + "/start";
    s.op = "trainstep.all_gather_start";
    s.attrs = {{"counts", counts}, {"rank", rank}, {"overlap", o.overlap},
               {"dtype", dtype_name(dt)}};
    w.name = name + "/wait";
    w.op = "trainstep.all_gather_wait";
    w.attrs = {{"counts", counts}, {"rank", rank}, {"shapes", json::array()}};
    int64_t total = 0;
    for (const std::string& param : buckets[b]) {
      const Port* p = new_param.at(param);
      if (plan.owner(param) == rank) s.inputs.push_back(map[p->value]);
      w.attrs["shapes"].push_back(p->type.shape);
      const int r = add_value(g, "gathered/" + p->state, p->type);
      w.outputs.push_back(r);
      w.declared.push_back(p->type);
      gathered[param] = r;
      total += p->type.numel();
    }
    const int bucket = add_value(g, name + "/bucket", TensorType{dt, {total}});
    const int req = add_value(g, name + "/request", TensorType{DType::I64, {}});
    s.outputs = {bucket, req};
    s.declared = {g.value_types[bucket], g.value_types[req]};
    w.inputs = {bucket, req};
    g.nodes.push_back(std::move(s));
    g.nodes.push_back(std::move(w));
  }
  // The waits last, so the updates run while the gathers do.
  std::stable_partition(g.nodes.begin(), g.nodes.end(),
                        [](const Node& n) { return def_of(n).comm != CommRole::Wait; });
  for (const Port& q : f.outputs) {
    Port p = q;
    if (q.role == Role::State && is_param(q.state)) p.value = gathered.at(q.state);
    else if (q.role == Role::State && plan.holds(q.state, rank)) p.value = map[q.value];
    else continue;
    g.outputs.push_back(p);
  }
  chain_collectives(g);
  try {
    compact(g);
  } catch (const Error& e) {
    fail(what + ": --shard-optimizer: rank " + std::to_string(rank) + "'s update: " + e.what());
  }
  return g;
}

json chunk_counts(const ShardPlan& plan, std::vector<std::string>& params,
                  const std::map<std::string, int64_t>& numel) {
  std::stable_sort(params.begin(), params.end(), [&](const std::string& a, const std::string& b) {
    return plan.owner(a) < plan.owner(b);
  });
  std::vector<int64_t> n(size_t(plan.ranks), 0);
  for (const std::string& p : params) n[size_t(plan.owner(p))] += numel.at(p);
  return n;
}

void chain_collectives(Function& f) {
  int prev = -1;  // the last start's request
  for (Node& n : f.nodes) {
    if (def_of(n).comm != CommRole::Start) continue;
    const bool chained = n.attrs.contains("after") && n.attrs["after"].get<bool>();
    if (prev >= 0 && !chained) {
      n.inputs.push_back(prev);
      n.attrs["after"] = true;
    }
    prev = n.outputs.at(1);
  }
}

}  // namespace ts

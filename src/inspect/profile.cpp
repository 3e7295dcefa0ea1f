// What `bench --profile` reports of a session's train_step: node times,
// kernel picks, the all-reduce and the memory plan.
#include <map>

#include "ops/kernel_choice.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "trainstep/bench.h"

namespace ts {

std::vector<NodeProfile> train_profile(const Session& s) {
  std::vector<NodeProfile> rows;
  for (const NodeTime& t : s.train_profile()) {
    const Node& n = *t.node;
    NodeProfile r;
    r.node = n.name;
    r.op = n.op;
    if (!n.declared.empty()) r.output_type = n.declared[0].str();
    r.trans_a = n.attrs.value("trans_a", false);
    r.trans_b = n.attrs.value("trans_b", false);
    r.data_movement = n.def->data_movement;
    r.seconds = t.seconds;
    r.layout_seconds = t.layout_seconds;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<KernelPick> kernel_picks(const Session& s) {
  std::map<std::string, KernelPick> by_key;
  for (const auto& [node, c] : s.train_executor().kernel_choices()) {
    KernelPick& p = by_key.try_emplace(c->key, KernelPick{c->key, 0, c->describe()}).first->second;
    p.nodes += 1;
  }
  std::vector<KernelPick> picks;
  for (auto& [key, p] : by_key) picks.push_back(std::move(p));
  return picks;
}

AllReduceStats all_reduce_stats(const Session& s) {
  const Executor& ex = s.train_executor();
  AllReduceStats r;
  for (const auto& t : ex.profile())
    if (t.node->def->comm == CommRole::Wait) r.wait_seconds += t.seconds;
  for (const auto& n : ex.function().nodes)
    if (n.def->comm == CommRole::Start) {
      ++r.buckets;
      r.bytes += ex.function().value_types[n.outputs[0]].nbytes();
    }
  if (s.collective()) r.reduce_seconds = s.collective()->reduce_seconds();
  return r;
}

std::string train_memory_summary(const Session& s) {
  size_t state_bytes = 0;
  for (const auto& n : s.state_names()) state_bytes += s.state(n).nbytes();
  return memory_summary(s.train_executor().plan(), state_bytes);
}

std::string shard_memory_summary(const Session& s) {
  if (!s.shards_optimizer()) return "";
  std::vector<double> held(size_t(s.world_size()), 0.0);
  held[size_t(s.rank())] = double(s.state_bytes());
  s.collective()->all_reduce_now(held.data(), held.size(), DType::F64, ReduceOp::Sum,
                                 "the state each rank holds");
  size_t whole = 0;
  for (const auto& st : s.program().state) whole += st.type.nbytes();
  std::string r = "--shard-optimizer: state per rank";
  for (size_t k = 0; k < held.size(); ++k)
    r += (k ? " / " : " ") + bytes_str(size_t(held[k]));
  return r + " (unsharded " + bytes_str(whole) + " each)";
}

std::string train_memory_peak(const Session& s) {
  return memory_peak_report(s.train_executor().function(), s.train_executor().plan());
}

}  // namespace ts

// The --distributed flags (train, bench) and the process's collective.
#include <cstdio>
#include <cstdlib>

#include "commands.h"

namespace tscli {

std::shared_ptr<ts::Collective>& distributed() {
  static std::shared_ptr<ts::Collective> c;
  return c;
}

void end_distributed(int code) {
  auto& c = distributed();
  if (c && code != 0 && c->size() > 1) c->abort(code);
  c.reset();
}

void add_distributed(CLI::App* cmd, Distributed& d) {
  CLI::Option* kind = cmd->add_option("--distributed", d.kind,
                  "mpi: data-parallel over the ranks of mpirun/srun (the artifact's batch size is "
                  "per rank)")
      ->check(CLI::IsMember({"mpi"}));
  cmd->add_option("--collective-timeout", d.timeout_s,
                  "seconds a rank waits for the others in one collective before it fails, "
                  "naming the ranks that did not answer (default 300)")
      ->check(finite_at_least(0.001));
  cmd->add_option("--first-bucket-mb", d.first_mb,
                  "MiB of gradients in the first all-reduce bucket (default 1, as DDP)")
      ->check(finite_at_least(0));
  cmd->add_option("--bucket-cap-mb", d.cap_mb,
                  "MiB of gradients per later all-reduce bucket (default 25, as DDP)")
      ->check(finite_at_least(0));
  cmd->add_flag_callback("--no-overlap", [&d] { d.overlap = false; },
                         "reduce every bucket after the backward, not during it");
  cmd->add_flag("--shard-optimizer", d.shard_optimizer,
                "ZeRO stage 1: each rank updates a share of the parameters and holds only their "
                "optimizer state (gradients reduce-scattered, parameters all-gathered)")
      ->needs(kind);
}

void start_distributed(const Distributed& d, ts::SessionOptions& o) {
  if (d.kind.empty()) return;
  ts::MpiOptions mo;
  mo.timeout_s = d.timeout_s;
  distributed() = ts::mpi_collective(mo);
  o.collective = distributed();
  // Rank and size are MPI's; a launcher variable that says otherwise is
  // worth a line (e.g. mpirun inside an sbatch step: SLURM_PROCID is 0).
  const int rank = distributed()->rank();
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* e = std::getenv(v);
    if (e && *e && std::to_string(rank) != e)
      std::fprintf(stderr, "trainstep: note: %s=%s, but MPI says this is rank %d of %d (MPI's "
                   "rank is used)\n", v, e, rank, distributed()->size());
  }
  o.buckets.first_bytes = static_cast<size_t>(d.first_mb * 1024 * 1024);
  o.buckets.cap_bytes = static_cast<size_t>(d.cap_mb * 1024 * 1024);
  o.buckets.overlap = d.overlap;
  o.shard_optimizer = d.shard_optimizer;
}

}  // namespace tscli

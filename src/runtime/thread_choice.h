// Which nodes run on one thread. Every parallel kernel pays an OpenMP fork
// and join, a microsecond or two, and a step of many small nodes pays it
// hundreds of times: tests/python/specs/sdpa_gpt.py's step (941 nodes)
// took 0.21 ms at one thread and 0.23-0.58 ms at two. So where the
// executor has several threads, a node whose inputs and outputs hold at
// most kOneThreadMaxBytes is built for one thread and runs with OpenMP's
// thread count at one; larger nodes keep every thread.
//
// The bound was measured on the 2-core Zen 4 (docs/performance.md,
// "Threads"): at 2 threads the small GPT's step went 0.31-0.33 -> 0.21 ms
// with 64 KiB (16 KiB changed nothing: most of its nodes lie between), and
// MNIST's, the ResNet's and the transformer's steps did not move. It is a
// fixed rule, not a per-node measurement, so every process and every rank
// splits the same nodes and computes the same bits.
#pragma once
#include <cstddef>
#include <memory>

#include "ops/op.h"

namespace ts {

constexpr size_t kOneThreadMaxBytes = size_t(64) << 10;

// Whether a node of `def` whose inputs and outputs hold io_bytes runs on
// one thread in an executor with `threads` (collectives never do: their
// kernels only start and wait).
bool runs_on_one_thread(const OpDef& def, int threads, size_t io_bytes);

// The node's kernel: make_kernel(def, k), or, where runs_on_one_thread
// holds, its one-thread build, run with OpenMP's thread count at one.
std::unique_ptr<Kernel> make_node_kernel(const OpDef& def, const KernelCtx& k, size_t io_bytes);

}  // namespace ts

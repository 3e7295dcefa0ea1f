// trainstep.fused_elementwise: a group of float32/bool pointwise ops run as
// one kernel over cache-sized tiles (made by passes/fuse_elementwise).
//
// attrs members and outputs: the group (tile_program.h); its input k is the
// node's input k, its outputs the node's.
//
// infer re-runs every member op's infer on the member types, so a program
// with fused nodes verifies exactly like the unfused one.
#include <omp.h>

#include "ops/broadcast.h"
#include "ops/parallel.h"
#include "ops/tile_program.h"

namespace ts {

namespace {

std::vector<TensorType> node_inputs(const NodeCtx& ctx) {
  std::vector<TensorType> in;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) ctx.fail("input " + std::to_string(i) + " is None");
    in.push_back(ctx.input(i));
  }
  return in;
}

std::vector<TensorType> fused_infer(const NodeCtx& ctx) {
  return group_signature(ctx, node_inputs(ctx)).outputs;
}

struct FusedKernel : Kernel {
  std::unique_ptr<TileProgram> prog;
  int nthr = 1;

  void run(const Tensor* in, Tensor* out) override {
    const int64_t numel = prog->numel();
    if (numel == 0) return;
    prog->begin(in, out);
    const int64_t ntiles = (numel + kTile - 1) / kTile;
    // Each thread has its own registers (thread 0's when the loop runs on
    // the calling thread); tiles are independent.
    parallel_region(numel > kParallelMin, [&](int t, int nt) {
      int64_t tile0, tile1;
      split_range(ntiles, t, nt, tile0, tile1);
      for (int64_t tile = tile0; tile < tile1; ++tile) {
        const int64_t off = tile * kTile;
        if (tile + kPrefetchTiles < tile1) prog->prefetch(off + kPrefetchTiles * kTile, in);
        prog->run_tile(t, off, std::min(kTile, numel - off), in, out);
      }
    }, nthr);
  }
};

std::unique_ptr<Kernel> fused_make(const KernelCtx& kc) {
  const NodeCtx& ctx = kc.node;
  auto k = std::make_unique<FusedKernel>();
  k->nthr = kc.threads > 0 ? kc.threads : omp_get_max_threads();
  std::vector<int> tensor_of(ctx.num_inputs());
  for (int i = 0; i < ctx.num_inputs(); ++i) tensor_of[i] = i;
  k->prog = std::make_unique<TileProgram>(ctx, node_inputs(ctx), tensor_of, 0, k->nthr);
  return k;
}

}  // namespace

void register_fused_ops(OpRegistry& r) {
  OpDef fused{"trainstep.fused_elementwise",
              "a group of float32/bfloat16/bool pointwise ops run as one kernel over float32 tiles, each bfloat16 value rounded where it is computed (attrs members, outputs; made by the fusion pass)",
              &fused_infer, &fused_make, false, nullptr, true};
  fused.bf16 = Bf16::Native;
  fused.fuse_role = FuseRole::ElementwiseGroup;
  r.add(std::move(fused));
}

}  // namespace ts

// A group of pointwise ops compiled to tile steps: the engine of
// trainstep.fused_elementwise, and the epilogue and prologue that batch
// norm's fused forms (batch_norm.cpp) run on each tile of their
// activations, so that those never pass through memory.
//
// The group is given as two attributes of the node:
//   members: [{"name", "op", "attrs", "args": [ref, ...]}, ...] in execution
//            order; a ref is ["in", k] (the group's input k) or ["m", j] (the
//            value of an earlier member j). A member with no args whose op
//            makes a constant (OpDef::constant: trainstep.constant,
//            aten.scalar_tensor) is an immediate, evaluated once at compile
//            time.
//   outputs: [j, ...]: the group's outputs are these members' values.
// Inputs have the group's shape or one element; one-element inputs may have
// any dtype (cast to float32 as the member kernels would), the others are
// float32, bfloat16 or bool. Outputs have each member op's own dtype
// (float32/bfloat16/bool). Tiles hold float32; a member whose value is
// bfloat16 is rounded to it where it is computed, as eager rounds each op.
#pragma once
#include <memory>
#include <vector>

#include "ops/op.h"

namespace ts {

constexpr int64_t kTile = 1024;  // floats per register: a few dozen fit in L1/L2

// The group's outputs' types and shape; fails on `ctx` naming the member.
struct GroupSignature {
  std::vector<TensorType> outputs;
  Shape shape;
};
// `inputs`: the group's input types (a ref ["in", k] reads inputs[k]).
GroupSignature group_signature(const NodeCtx& ctx, const std::vector<TensorType>& inputs);

// Asks for the cache lines of [p, p + bytes) (into L2): see
// TileProgram::prefetch.
inline void prefetch_lines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 2);
}

// How many tiles ahead the tile loops ask for their inputs' lines.
constexpr int64_t kPrefetchTiles = 8;

class TileProgram {
 public:
  // tensor_of[k]: the node input tensor that holds group input k, or -1 for
  // the one input the caller hands to run_tile as a float tile (`given`).
  // Group output o is node output out_base + o; out_base -1: the caller
  // takes output 0 from run_tile (`take`) and there is no other.
  TileProgram(const NodeCtx& ctx, const std::vector<TensorType>& inputs, std::vector<int> tensor_of,
              int out_base, int threads);
  ~TileProgram();
  TileProgram(const TileProgram&) = delete;
  TileProgram& operator=(const TileProgram&) = delete;

  int64_t numel() const;
  // Once per run, before any tile: the one-element inputs' values, and which
  // outputs are computed in place.
  void begin(const Tensor* in, Tensor* out);
  // Asks for the lines of elements [off, off + kTile) of the full-size
  // input tensors: a tile's steps each make a pass over L1, and a 4 KiB
  // burst per input is too short for the hardware prefetcher to run ahead,
  // so callers ask for a later tile's lines first.
  void prefetch(int64_t off, const Tensor* in) const;
  // Elements [off, off + len) (len <= kTile) of every full-size input and
  // output, on thread t < threads. `given`: that input's len values; `take`:
  // where output 0's len values go (out_base -1).
  void run_tile(int t, int64_t off, int64_t len, const Tensor* in, Tensor* out,
                const float* given = nullptr, float* take = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace ts

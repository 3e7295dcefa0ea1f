// Launch parameters of the shape family (shape.cu: strided copies) and the
// index family (index.cu: gather, scatter, index_select, index_put). Plain
// structs: the .cu files see nothing of the IR. Offsets and strides count
// elements, not bytes; all tensors are contiguous buffers.
#pragma once
#include "cuda/launch.h"

namespace ts::cuda {

// One strided copy: for each multi-index i over size[0..rank), element
// dst.offset + sum i_d * dst.stride[d] of `out` becomes element
// src.offset + sum i_d * src.stride[d] of `in`. Elements are moved as raw
// bytes of size `elem` (1, 2, 4 or 8), so every dtype works.
struct CopyParams {
  const void* in = nullptr;
  void* out = nullptr;
  int elem = 4;
  int rank = 0;
  int64_t size[kMaxRank] = {};
  Strided src, dst;
  int64_t n = 0;  // product of size
};
// A plain memcpy when both sides are contiguous, else a grid-stride kernel.
// Check with check_launch afterwards.
void launch_strided_copy(const CopyParams& p, cudaStream_t stream);

// How the index kernels treat elements. Move: raw bytes of size `elem`;
// the rest: added (atomically) as that type.
enum class ElemOp : int { Move, AddF32, AddF64, AddI32, AddI64 };

// gather / scatter over the elements e of `index` (shape ishape[0..rank)):
// the element of self at sum_{d != dim} i_d * sstride[d] + index[e] *
// dstride (gather reads it into out[e]; scatter writes out there), src read
// at sum i_d * rstride[d]. Indices outside [0, D) cannot throw on the
// GPU (the CPU kernel does): gather writes 0 there, scatter skips them.
struct IndexParams {
  const void* self = nullptr;  // gather's source
  const int64_t* index = nullptr;
  const void* src = nullptr;  // scatter.src / scatter_add; nullptr: scatter.value
  void* out = nullptr;
  int elem = 4;
  ElemOp op = ElemOp::Move;
  int rank = 0;
  int dim = 0;
  int64_t ishape[kMaxRank] = {};
  int64_t sstride[kMaxRank] = {};
  int64_t rstride[kMaxRank] = {};
  int64_t D = 1;        // self's size along dim
  int64_t dstride = 0;  // self's stride along dim (0 for a 0-d self)
  int64_t n = 0;        // index elements
  uint64_t value = 0;  // scatter.value's element, its low `elem` bytes
};
void launch_gather(const IndexParams& p, cudaStream_t stream);
// out must already hold a copy of self.
void launch_scatter(const IndexParams& p, cudaStream_t stream);

// Row ops on self viewed as [O, D, I] and index as K entries:
// index_select: out[o, k, :] = self[o, index[k], :] (out of range: zeros);
// index_put (O = 1): out[index[k], :] = / += values[k, :], negative indices
// counted from the end, out of range skipped; out must hold a copy of self.
struct RowsParams {
  const void* self = nullptr;
  const int64_t* index = nullptr;
  const void* values = nullptr;
  void* out = nullptr;
  int elem = 4;
  ElemOp op = ElemOp::Move;
  int64_t O = 1, D = 1, I = 1, K = 0;
};
void launch_index_select(const RowsParams& p, cudaStream_t stream);
void launch_index_put(const RowsParams& p, cudaStream_t stream);

}  // namespace ts::cuda

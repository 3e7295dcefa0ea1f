// Merges a sum of matrix products into one product over the concatenated
// inner dimension: op(a1) @ op(b1) + ... + op(an) @ op(bn) becomes
// op(cat(a_i)) @ op(cat(b_i)), the a_i and b_i joined along K.
//
// The unrolled RNN's weight gradient is such a sum: one small product per
// time step (K = the batch), 64 of them added at the end. As one product
// it runs as a single large GEMM near the FMA peak instead of 64 at a
// fraction of it, and the 64 M x N partial gradients, all live until the
// sum, are never stored.
//
// It applies to a tree of aten.add (alpha 1, no broadcasting) whose inner
// sums have no other reader; the leaves that are rank-2 products (mm or
// trainstep.matmul) with the same transposition flags and dtype, read only
// by the tree, merge (at least two); other leaves are added to the result.
#pragma once
#include "ir/program.h"

namespace ts {

void merge_summed_products(Function& f);

}  // namespace ts

// Folds aten.t into matrix products: mm(t(x), y), mm(x, t(y)) and both become
// trainstep.matmul with trans_a / trans_b (oneDNN reads the operand
// transposed in place); t(t(x)) -> x; t(mm(a, b)) -> trainstep.matmul
// computing b^T @ a^T when the t is the product's only reader;
// bmm(transpose(x, 1, 2), y) and the like become rank-3 trainstep.matmul;
// addmm(self, x, t(w)), nn.Linear's forward, becomes trainstep.addmm with
// trans_b (the weight's transpose was copied every step).
// Transposes nobody reads any more are removed.
#pragma once
#include "ir/program.h"

namespace ts {

// batched: also fold a rank-3 transpose of the last two dims into a
// batched product (bmm, or a rank-3 trainstep.matmul) that reads it.
void fold_transpose(Function& f, bool batched = true);

}  // namespace ts

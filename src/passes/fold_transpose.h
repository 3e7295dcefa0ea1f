// Folds aten.t into matrix products: mm(t(x), y), mm(x, t(y)) and both become
// trainstep.matmul with trans_a / trans_b (oneDNN reads the operand
// transposed in place); t(t(x)) -> x; t(mm(a, b)) -> trainstep.matmul
// computing b^T @ a^T when the t is the product's only reader. Transposes
// nobody reads any more are removed.
#pragma once
#include "ir/program.h"

namespace ts {

void fold_transpose(Function& f);

}  // namespace ts

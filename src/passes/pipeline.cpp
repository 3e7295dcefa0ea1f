#include "passes/pipeline.h"

namespace ts {

void optimize(Function& f, const CompileOptions& o) {
  (void)f;
  (void)o;  // passes are added here as they land
}

}  // namespace ts

// libFuzzer entry point; FUZZ_TARGET names the function in targets.h.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ts_fuzz::FUZZ_TARGET(data, size);
  return 0;
}

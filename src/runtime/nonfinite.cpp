#include "runtime/nonfinite.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/parallel.h"

namespace ts {

namespace {

// Elements [begin, end) scanned in blocks without an early exit, so the
// inner loop vectorizes. Adding the lowest exponent bit carries into the
// sign bit exactly when all exponent bits are set (inf or NaN), so an
// OR-reduction of integers finds them.
template <class U>
int64_t scan(const void* data, int64_t begin, int64_t end, U exponent) {
  const char* p = static_cast<const char*>(data);
  const U low = exponent & (~exponent + 1);
  auto bad = [&](int64_t i) {
    U u;
    std::memcpy(&u, p + i * sizeof(U), sizeof(U));
    return (u & exponent) == exponent;
  };
  constexpr int64_t kBlock = 1024;
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t e = std::min(end, b + kBlock);
    U acc = 0;
    for (int64_t i = b; i < e; ++i) {
      U u;
      std::memcpy(&u, p + i * sizeof(U), sizeof(U));
      acc |= (u & exponent) + low;
    }
    if (!(acc >> (sizeof(U) * 8 - 1))) continue;
    for (int64_t i = b; i < e; ++i)
      if (bad(i)) return i;
  }
  return -1;
}

template <class U>
int64_t first_bad(const Tensor& t, int threads, U exponent) {
  const int64_t n = t.numel();
  constexpr int64_t kParallel = 1 << 16;  // below this a team costs more than it saves
  if (n < kParallel) return scan<U>(t.data, 0, n, exponent);
  std::atomic<int64_t> first{n};
  parallel_region(
      true,
      [&](int tid, int nt) {
        int64_t b, e;
        split_range(n, tid, nt, b, e);
        int64_t i = scan<U>(t.data, b, e, exponent);
        if (i < 0) return;
        int64_t cur = first.load();
        while (i < cur && !first.compare_exchange_weak(cur, i)) {
        }
      },
      threads);
  return first.load() < n ? first.load() : -1;
}

}  // namespace

int64_t first_nonfinite(const Tensor& t, int threads) {
  if (t.dtype == DType::F32) return first_bad<uint32_t>(t, threads, 0x7f800000u);
  if (t.dtype == DType::F64) return first_bad<uint64_t>(t, threads, 0x7ff0000000000000ull);
  if (t.dtype == DType::BF16) return first_bad<uint16_t>(t, threads, uint16_t{0x7f80});
  return -1;
}

}  // namespace ts

// Per-lane sums over one (sample, channel block) of channel-blocked data:
// S rows of B lanes, one lane per channel. The blocked batch norm's first
// pass (batch_norm.cpp) and the spatial mean (reduce.cpp) spend most of
// their time here, and a compiler leaves the per-lane double sums scalar, so
// each ISA level has its own loop. Every level adds each lane's rows in row
// order, in double.
#pragma once
#include <cstdint>

namespace ts {

// Per lane l < B, with d = x - shift[l]:
//   dy null (forward): s1 = sum(d),  s2 = sum(d * d);
//   else (backward):   s1 = sum(dy), s2 = sum(d * dy).
// B is 8 or 16; the level is cpu_isa()'s at the call. accumulate: the sums
// go on from s1 and s2's values, so calls on consecutive runs of rows add
// in the order, and give the bits, of one call on all of them.
void block_lane_sums(int B, const float* x, const float* dy, const double* shift, int64_t S,
                     double* s1, double* s2, bool accumulate = false);

}  // namespace ts

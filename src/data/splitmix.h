// splitmix64 (Steele, Lea, Flood 2014): the one generator behind the data
// path's randomness (epoch shuffles, sample_random, crops and flips), so
// the formula tests replay is written once.
#pragma once
#include <cstdint>

namespace ts {

// Advances `state` by the golden-ratio increment and returns its mix.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace ts

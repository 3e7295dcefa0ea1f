// The Dataset base class: field names in messages, the per-sample random
// bits, and the defaults of its two forms (a dataset implements one).
#include <string>

#include "trainstep/dataset.h"
#include "trainstep/error.h"

namespace ts {

std::string Field::str() const { return name + ": " + TensorType{dtype, shape}.str(); }

namespace {
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

uint64_t sample_random(const ReadContext& c, int64_t i) {
  return mix(mix(mix(c.seed) ^ static_cast<uint64_t>(c.epoch)) ^ static_cast<uint64_t>(i));
}

void Dataset::read(int64_t, const ReadContext&, void* const*) const {
  fail("dataset (" + describe() + ") declares fields but does not implement read()");
}

void Dataset::check(int64_t, const TensorType&, const TensorType&) const {
  fail("dataset (" + describe() + ") has neither fields() nor the one-input, one-target "
       "check()/write()");
}

void Dataset::write(int64_t, int64_t, const Tensor&, const Tensor&) const {
  fail("dataset (" + describe() + ") has neither fields() nor write()");
}

}  // namespace ts

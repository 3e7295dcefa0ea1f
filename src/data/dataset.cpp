// The Dataset base class: field names in messages, the per-sample random
// bits, and the defaults of its two forms (a dataset implements one).
#include <string>

#include "data/splitmix.h"
#include "trainstep/dataset.h"
#include "trainstep/error.h"

namespace ts {

std::string Field::str() const { return name + ": " + TensorType{dtype, shape}.str(); }

namespace {
uint64_t mix(uint64_t z) { return splitmix64(z); }
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

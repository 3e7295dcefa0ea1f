// Datasets through the train loop's data path: ports named input0 and
// target, fed by name (data/feed.h) and filled by a Batcher.
#pragma once
#include <memory>
#include <vector>

#include "data/batcher.h"
#include "data/feed.h"

namespace ts_test {

// A feed of one input port `x` and one target port `y` (whole-batch types).
inline ts::Feed xy_feed(const ts::Dataset& d, const ts::TensorType& x, const ts::TensorType& y,
                        std::map<std::string, std::string> map = {}) {
  const int64_t batch = x.shape.empty() ? 1 : x.shape[0];
  return ts::make_feed(d, {{"input0", false, x, 0}, {"target", true, y, 0}}, batch, map);
}

// Batch b of the batcher's order into x and y; the real rows.
inline int64_t fill_xy(const ts::Batcher& b, const ts::Feed& f, int64_t index, const ts::Tensor& x,
                       const ts::Tensor& y) {
  return b.fill(index, f, {x, y});
}

}  // namespace ts_test

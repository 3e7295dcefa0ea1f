// Which field of a dataset feeds each input and target port of a step, by
// name: an explicit map first, then the port's own name, then its name
// without its first part ("batch/input_ids" -> "input_ids", "target/labels"
// -> "labels"), then "x" for a lone input and "y", "label" or "labels" for a
// lone target (the built-in datasets' x and y). A field fits a port when the dtypes agree
// and a sample has as many elements as one batch row of the port (a
// [28, 28] image feeds a [B, 1, 28, 28] port: rows are reshaped, not
// converted).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainstep/dataset.h"

namespace ts {

// A port of the step as the data path sees it.
struct PortSpec {
  std::string name;
  bool target = false;  // a target port; else a model input
  TensorType type;      // the whole batch
  int batch_dim = 0;
};

struct Feed {
  const Dataset* data = nullptr;  // the dataset, or `adapter` around it
  std::unique_ptr<Dataset> adapter;
  std::vector<PortSpec> ports;    // inputs first, then targets, as given
  std::vector<size_t> field;      // per port: the field of data that feeds it
  std::vector<TensorType> rows;   // per port: its batch-major type
  size_t nfields = 0;             // fields of data
};

// Throws ts::Error naming the port, the field and both types when a port
// has no field or one that does not fit. `map`: port name -> field name.
Feed make_feed(const Dataset& d, std::vector<PortSpec> ports, int64_t batch,
               const std::map<std::string, std::string>& map);

// t with its dim bd moved to the front: the batch-major layout datasets
// write (fails when bd is not a dim of t).
TensorType batch_major(const TensorType& t, int bd);

}  // namespace ts

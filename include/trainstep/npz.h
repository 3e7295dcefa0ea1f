// numpy arrays written as an .npz, public: what `trainstep data --write`
// saves samples to (the npz:FILE dataset reads such files back).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/dtype.h"
#include "trainstep/tensor.h"

namespace ts {

struct NpyArray {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;  // row-major, little-endian, shape_numel(shape) elements
};

// Writes arrays as an uncompressed .npz that numpy.load reads (and
// read_npz), each array as NAME.npy with a version 1.0 header. libzip
// writes a temporary file and renames it over `path`, so a reader never
// sees half a file. Throws ts::Error naming the path.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays);

}  // namespace ts

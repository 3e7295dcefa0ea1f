#include "trainstep/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "trainstep/error.h"

namespace ts {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(size_t nbytes) : size_(nbytes) {
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) fail("out of memory allocating " + std::to_string(nbytes) + " bytes");
  std::memset(p, 0, rounded);
  ptr_.reset(p);
}

HostTensor::HostTensor(DType dt, Shape shape) {
  view.dtype = dt;
  view.shape = std::move(shape);
  buf = Buffer(view.nbytes());
  view.data = buf.data();
}

}  // namespace ts

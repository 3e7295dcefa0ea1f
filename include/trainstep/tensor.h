// Tensors in the runtime are dense, contiguous and row-major. A Tensor is a
// non-owning view (dtype, shape, data); Buffer owns aligned memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainstep/dtype.h"

namespace ts {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64, 1, 28, 28]"

// Static type of a value in the IR. `wrapped` marks a Python scalar captured
// as a 0-d constant: it has the lowest priority in dtype promotion, as in
// PyTorch.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  bool wrapped = false;
  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string str() const;  // "float32[64, 10]"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

// 64-byte aligned heap memory, zero-initialised.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t nbytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  void* data = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int rank() const { return static_cast<int>(shape.size()); }
  TensorType type() const { return {dtype, shape}; }
  template <class T>
  T* as() const { return static_cast<T*>(data); }
};

// A tensor that owns its memory (API users, state, checkpoints).
struct HostTensor {
  Tensor view;
  Buffer buf;
  HostTensor() = default;
  HostTensor(DType dt, Shape shape);
  const Tensor& tensor() const { return view; }
};

}  // namespace ts

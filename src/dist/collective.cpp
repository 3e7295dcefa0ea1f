// The blocking conveniences every Collective has, and the stand-ins for a
// build without MPI.
#include "trainstep/collective.h"

#include <cstring>
#include <vector>

#include "trainstep/error.h"

namespace ts {

double Collective::sum(double v, const char* what) {
  all_reduce_now(&v, 1, DType::F64, ReduceOp::Sum, what);
  return v;
}

int64_t Collective::max(int64_t v, const char* what) {
  all_reduce_now(&v, 1, DType::I64, ReduceOp::Max, what);
  return v;
}

std::string Collective::broadcast_string(const std::string& s, int root, const char* what) {
  int64_t n = static_cast<int64_t>(s.size());
  broadcast(&n, sizeof n, root, what);
  std::vector<char> buf(static_cast<size_t>(n));
  if (rank() == root && n) std::memcpy(buf.data(), s.data(), buf.size());
  if (n) broadcast(buf.data(), buf.size(), root, what);
  return std::string(buf.begin(), buf.end());
}

#ifndef TRAINSTEP_HAVE_MPI
bool have_mpi() { return false; }
std::shared_ptr<Collective> mpi_collective(const MpiOptions&) {
  fail("this trainstep was built without MPI (cmake -DTRAINSTEP_WITH_MPI=ON, with "
       "libopenmpi-dev installed, builds it in)");
}
#endif

}  // namespace ts

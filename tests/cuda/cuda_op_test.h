// Oracle tests for the CUDA kernels: one node run by the CPU kernel (the
// registry's OpDef::make, itself checked against PyTorch eager) and by the
// CUDA kernel (cuda::KernelTable) on the same random inputs; the outputs
// must agree. Every test skips on a machine with no GPU.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/kernel.h"
#include "op_test_util.h"

namespace ts_cuda_test {

using json = nlohmann::json;

// True when a CUDA device is usable; caches the answer.
bool have_gpu();
#define SKIP_WITHOUT_GPU() \
  if (!::ts_cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device on this machine"

// Handles shared by the tests (made once, on first use).
const ts::cuda::Ctx& test_ctx();

// Random host tensors of any dtype: floats uniform in [lo, hi), integers
// uniform in [lo, hi) (as integers), bools fair coins.
ts::HostTensor random_tensor(ts::DType dt, const ts::Shape& shape, std::mt19937& rng,
                             double lo = -1, double hi = 1);

struct Tolerance {
  double rtol = 1e-5, atol = 1e-5;  // |gpu - cpu| <= atol + rtol * |cpu|, for floats
};

// Runs op on the CPU and on the GPU with these inputs (nullptr: absent) and
// compares every output the CPU kernel wrote (bit-exact for integers and
// bools). Outputs listed in `skip` are not compared (an op's scratch, e.g.
// max-pool indices in another encoding). GPU outputs are poisoned with NaN
// first, so an element the kernel does not write fails.
::testing::AssertionResult cpu_gpu_agree(const std::string& op, const json& attrs,
                                         const std::vector<const ts::HostTensor*>& inputs,
                                         Tolerance tol = {}, std::vector<int> skip = {});

}  // namespace ts_cuda_test

// CUDA kernels of the counter-based random ops (trainstep.philox_uniform,
// trainstep.philox_normal): the same values as the CPU kernels for the same
// seed, offset and key. seed and offset stay in device memory; the kernel
// reads them, so a replayed graph picks up new values. Device code:
// random.cu.
#include "cuda/kernel.h"
#include "cuda/philox_launch.h"

namespace ts::cuda {
namespace {

template <bool Normal>
std::unique_ptr<Kernel> make_philox(const Build& b) {
  const NodeCtx& n = b.node();
  for (int i = 0; i < 2; ++i)
    if (n.input(i).dtype != DType::I64 || n.input(i).numel() != 1)
      n.fail("CUDA: seed and offset must be 0-d int64 tensors, got " + n.input(i).str());
  if (b.outputs().at(0).dtype != DType::F32)
    n.fail("CUDA: random output " + b.outputs()[0].str() + " not supported (float32 only)");
  const uint32_t key = static_cast<uint32_t>(n.attr_int("key"));
  return fn_kernel([key](const Tensor* in, Tensor* out, const Ctx& c) {
    if (!out[0].data) return;
    PhiloxParams p;
    p.seed = in[0].as<int64_t>();
    p.offset = in[1].as<int64_t>();
    p.key = key;
    p.out = out[0].as<float>();
    p.n = out[0].numel();
    p.normal = Normal;
    if (p.n == 0) return;
    launch_philox(p, c.stream);
    check_launch(Normal ? "philox_normal" : "philox_uniform");
  });
}

}  // namespace

void register_random(KernelTable& t) {
  t.add("trainstep.philox_uniform.default", make_philox<false>);
  t.add("trainstep.philox_normal.default", make_philox<true>);
}

}  // namespace ts::cuda

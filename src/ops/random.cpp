// Counter-based random ops. Both are pure functions of (seed, offset, key,
// element index), so a step is reproducible and the Python exporter computes
// the same values.
//
// philox_uniform: element i uses counter (lo32(i>>2), hi32(i>>2), key, offset)
//   and key (lo32(seed), hi32(seed)); it takes word i&3 of the Philox4x32-10
//   output x, u = (x >> 8) * 2^-24 in [0, 1) (exact in float).
// philox_normal: element i uses ONE counter per element,
//   (lo32(i), hi32(i), key, offset); with words x0, x1:
//   u1 = ((x0 >> 8) + 1) * 2^-24 in (0, 1], u2 = (x1 >> 8) * 2^-24,
//   z = sqrt(-2 ln u1) * cos(2 pi u2), computed in double, rounded to float.
#include <cmath>

#include "ops/broadcast.h"
#include "ops/philox.h"

namespace ts {

namespace {

constexpr double kTwoPow24Inv = 1.0 / 16777216.0;

std::vector<TensorType> philox_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  for (int i = 0; i < 2; ++i) {
    ctx.expect_dtype(i, DType::I64);
    if (ctx.input(i).numel() != 1) ctx.fail("seed and offset must be 0-d int64 tensors");
  }
  ctx.attr_int("key");
  Shape s = ctx.attr_ints("shape");
  for (int64_t d : s)
    if (d < 0) ctx.fail("negative size in shape " + shape_str(s));
  return {{DType::F32, s}};
}

struct PhiloxKernel : Kernel {
  bool normal = false;
  uint32_t key_attr = 0;
  void run(const Tensor* in, Tensor* out) override {
    if (!out[0].data) return;
    const uint64_t seed = static_cast<uint64_t>(*in[0].as<int64_t>());
    const uint32_t offset = static_cast<uint32_t>(*in[1].as<int64_t>());
    const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    const uint32_t ka = key_attr;
    float* o = out[0].as<float>();
    const int64_t n = out[0].numel();
    if (normal) {
      parallel_for(n, n > kParallelMin / 8, [&](int64_t i) {
        const uint64_t u = static_cast<uint64_t>(i);
        const uint32_t c[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), ka, offset};
        uint32_t x[4];
        philox4x32_10(c, key, x);
        const double u1 = (static_cast<double>(x[0] >> 8) + 1.0) * kTwoPow24Inv;
        const double u2 = static_cast<double>(x[1] >> 8) * kTwoPow24Inv;
        o[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      });
      return;
    }
    const int64_t blocks = (n + 3) / 4;
    parallel_for(blocks, n > kParallelMin, [&](int64_t b) {
      const uint64_t u = static_cast<uint64_t>(b);
      const uint32_t c[4] = {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32), ka, offset};
      uint32_t x[4];
      philox4x32_10(c, key, x);
      const int64_t m = std::min<int64_t>(4, n - b * 4);
      for (int64_t j = 0; j < m; ++j)
        o[b * 4 + j] = static_cast<float>(x[j] >> 8) * static_cast<float>(kTwoPow24Inv);
    });
  }
};

template <bool Normal>
std::unique_ptr<Kernel> philox_make(const KernelCtx& kc) {
  auto k = std::make_unique<PhiloxKernel>();
  k->normal = Normal;
  k->key_attr = static_cast<uint32_t>(kc.node.attr_int("key"));
  return k;
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add(OpDef{"trainstep.philox_uniform.default",
              "float32 uniform [0,1) of attr shape from Philox4x32-10 of inputs seed, offset (0-d int64) and attr key",
              &philox_infer, &philox_make<false>, false});
  r.add(OpDef{"trainstep.philox_normal.default",
              "float32 standard normal of attr shape: Box-Muller (in double) on Philox4x32-10 of seed, offset, key",
              &philox_infer, &philox_make<true>, false});
}

}  // namespace ts

// CUDA shape ops (clone, t/transpose/permute, expand, as_strided, cat,
// stack, slice, select, slice_scatter, splits) and index ops (gather,
// scatter, index_select, index_put) against the CPU kernels: the zoo's exact
// shapes, then random shapes and dtypes.
#include <algorithm>
#include <numeric>

#include "cuda_op_test.h"

namespace {

using ts::DType;
using ts::HostTensor;
using ts::Shape;
using ts_cuda_test::cpu_gpu_agree;
using ts_cuda_test::random_tensor;
using json = nlohmann::json;

const DType kDtypes[] = {DType::F32, DType::I64, DType::Bool, DType::F64, DType::I32, DType::U8};

DType pick_dtype(std::mt19937& rng) { return kDtypes[rng() % 6]; }

// Values that survive every dtype's round trip (small integers for ints).
HostTensor rnd(DType dt, const Shape& s, std::mt19937& rng) {
  return dt == DType::F32 || dt == DType::F64 ? random_tensor(dt, s, rng, -1, 1)
                                              : random_tensor(dt, s, rng, -100, 100);
}

Shape random_shape(std::mt19937& rng, int rank, int64_t max_dim = 6) {
  Shape s(rank);
  for (auto& d : s) d = 1 + int64_t(rng() % max_dim);
  return s;
}

// Indices uniform in [0, n).
HostTensor indices(const Shape& s, int64_t n, std::mt19937& rng) {
  return random_tensor(DType::I64, s, rng, 0, double(n));
}

// ---------------- shape ops ----------------

TEST(CudaShape, CloneAnyDtype) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (DType dt : kDtypes) {
    HostTensor x = rnd(dt, {3, 5, 7}, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.clone.default", {{"memory_format", nullptr}}, {&x}));
  }
  HostTensor s = rnd(DType::I64, {}, rng);  // 0-d (num_batches_tracked)
  EXPECT_TRUE(cpu_gpu_agree("aten.clone.default", {{"memory_format", nullptr}}, {&s}));
  HostTensor e = rnd(DType::F32, {0, 4}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.clone.default", {{"memory_format", nullptr}}, {&e}));
}

TEST(CudaShape, TransposeZooShapes) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  HostTensor a = rnd(DType::F32, {32, 64, 4, 32}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.transpose.int", {{"dim0", 1}, {"dim1", 2}}, {&a}));
  HostTensor b = rnd(DType::F32, {32, 4, 64, 32}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.transpose.int", {{"dim0", -2}, {"dim1", -1}}, {&b}));
  EXPECT_TRUE(cpu_gpu_agree("aten.transpose.int", {{"dim0", 1}, {"dim1", 2}}, {&b}));
  HostTensor m = rnd(DType::F32, {2048, 128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.t.default", json::object(), {&m}));
  HostTensor v = rnd(DType::F32, {7}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.t.default", json::object(), {&v}));
}

TEST(CudaShape, PermuteRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (int it = 0; it < 40; ++it) {
    const int r = 1 + int(rng() % 5);
    Shape s = random_shape(rng, r, 7);
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng);
    std::vector<int64_t> p(r);
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    if (rng() % 2) p[0] -= r;  // a negative dim
    EXPECT_TRUE(cpu_gpu_agree("aten.permute.default", {{"dims", p}}, {&x})) << ts::shape_str(s);
    const int64_t d0 = int64_t(rng() % r), d1 = int64_t(rng() % r);
    EXPECT_TRUE(cpu_gpu_agree("aten.transpose.int", {{"dim0", d0}, {"dim1", d1}}, {&x}));
    if (r == 2) {
      EXPECT_TRUE(cpu_gpu_agree("aten.t.default", json::object(), {&x}));
    }
  }
}

TEST(CudaShape, ExpandZooAndRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  HostTensor s0 = rnd(DType::F32, {}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", {128}}, {"implicit", false}}, {&s0}));
  HostTensor c = rnd(DType::F32, {128, 1}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", {128, 10}}, {"implicit", false}}, {&c}));
  HostTensor m = rnd(DType::F32, {128, 64, 1, 1}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", {128, 64, 7, 7}}, {"implicit", false}}, {&m}));
  HostTensor same = rnd(DType::F32, {32, 4, 64, 32}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", {32, 4, 64, 32}}, {"implicit", false}}, {&same}));
  HostTensor u = rnd(DType::F32, {32, 1, 64, 64}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", {32, 4, 64, 64}}, {"implicit", false}}, {&u}));
  for (int it = 0; it < 40; ++it) {
    const int r = int(rng() % 4);
    Shape in = random_shape(rng, r, 5);
    std::vector<int64_t> size;
    const int lead = int(rng() % 3);
    for (int i = 0; i < lead; ++i) size.push_back(1 + int64_t(rng() % 4));
    for (int64_t d : in) {
      if (rng() % 2) d = -1;
      else if (d == 1) d = 1 + int64_t(rng() % 5);
      size.push_back(d);
    }
    for (auto& d : in)
      if (rng() % 3 == 0) d = 1;  // more broadcast dims
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, in, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.expand.default", {{"size", size}, {"implicit", false}}, {&x}))
        << ts::shape_str(in);
  }
}

TEST(CudaShape, AsStridedQkvSplit) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  HostTensor qkv = rnd(DType::F32, {32, 64, 384}, rng);
  for (int64_t off : {0, 128, 256})
    EXPECT_TRUE(cpu_gpu_agree("aten.as_strided.default",
                              {{"size", {32, 64, 128}}, {"stride", {24576, 384, 1}}, {"storage_offset", off}},
                              {&qkv}));
  // Transposed, overlapping (stride 0) and offset views, other dtypes.
  HostTensor x = rnd(DType::I64, {6, 10}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.as_strided.default",
                            {{"size", {10, 6}}, {"stride", {1, 10}}, {"storage_offset", 0}}, {&x}));
  EXPECT_TRUE(cpu_gpu_agree("aten.as_strided.default",
                            {{"size", {3, 4, 5}}, {"stride", {0, 7, 2}}, {"storage_offset", 3}}, {&x}));
  HostTensor bl = rnd(DType::Bool, {5, 9}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.as_strided.default",
                            {{"size", {4, 4}}, {"stride", {9, 2}}, {"storage_offset", 1}}, {&bl}));
  EXPECT_TRUE(cpu_gpu_agree("aten.as_strided.default", {{"size", json::array()}, {"stride", json::array()}, {"storage_offset", 44}}, {&bl}));
}

TEST(CudaShape, CatZooAndRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  HostTensor a = rnd(DType::F32, {32, 64, 128}, rng), b = rnd(DType::F32, {32, 64, 128}, rng),
             c = rnd(DType::F32, {32, 64, 128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.cat.default", {{"dim", 2}}, {&a, &b, &c}));
  for (int it = 0; it < 30; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape base = random_shape(rng, r, 5);
    const int64_t dim = int64_t(rng() % r);
    DType dt = pick_dtype(rng);
    std::vector<HostTensor> ts;
    const int n = 1 + int(rng() % 4);
    for (int i = 0; i < n; ++i) {
      Shape s = base;
      s[dim] = int64_t(rng() % 4);  // 0 allowed
      ts.push_back(rnd(dt, s, rng));
    }
    if (rng() % 3 == 0) ts.push_back(rnd(dt, {0}, rng));  // legacy empty: skipped
    std::vector<const HostTensor*> in;
    for (auto& t : ts) in.push_back(&t);
    const int64_t d = rng() % 2 ? dim : dim - r;
    EXPECT_TRUE(cpu_gpu_agree("aten.cat.default", {{"dim", d}}, in)) << ts::shape_str(base) << " dim " << d;
  }
}

TEST(CudaShape, StackRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (int it = 0; it < 20; ++it) {
    const int r = int(rng() % 4);
    Shape s = random_shape(rng, r, 5);
    DType dt = pick_dtype(rng);
    std::vector<HostTensor> ts;
    const int n = 1 + int(rng() % 4);
    for (int i = 0; i < n; ++i) ts.push_back(rnd(dt, s, rng));
    std::vector<const HostTensor*> in;
    for (auto& t : ts) in.push_back(&t);
    const int64_t dim = int64_t(rng() % (r + 1));
    EXPECT_TRUE(cpu_gpu_agree("aten.stack.default", {{"dim", dim}}, in)) << ts::shape_str(s);
  }
}

TEST(CudaShape, SliceSelectScatterRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  for (int it = 0; it < 40; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape s = random_shape(rng, r, 7);
    const int64_t dim = int64_t(rng() % r), n = s[dim];
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng);
    json attrs = {{"dim", dim},
                  {"start", int64_t(rng() % (n + 2)) - 1},
                  {"end", rng() % 4 == 0 ? json(nullptr) : json(int64_t(rng() % (n + 3)) - 1)},
                  {"step", 1 + int64_t(rng() % 3)}};
    if (rng() % 5 == 0) attrs["end"] = INT64_MAX;
    EXPECT_TRUE(cpu_gpu_agree("aten.slice.Tensor", attrs, {&x})) << attrs.dump();
    // slice_scatter: src shaped like the slice.
    auto out = ts_test::infer_op("aten.slice.Tensor", attrs, {x.view.type()});
    HostTensor src = rnd(dt, out[0].shape, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.slice_scatter.default", attrs, {&x, &src})) << attrs.dump();
    const int64_t idx = int64_t(rng() % (2 * n)) - n;
    EXPECT_TRUE(cpu_gpu_agree("aten.select.int", {{"dim", dim}, {"index", idx}}, {&x}));
  }
}

TEST(CudaShape, SplitsRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  for (int it = 0; it < 30; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape s = random_shape(rng, r, 7);
    const int64_t dim = int64_t(rng() % r), n = s[dim];
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.unbind.int", {{"dim", dim}}, {&x}));
    EXPECT_TRUE(cpu_gpu_agree("aten.unsafe_split.Tensor", {{"dim", dim}, {"split_size", 1 + int64_t(rng() % n)}}, {&x}));
    std::vector<int64_t> sizes;
    for (int64_t left = n; left > 0;) {
      const int64_t k = std::min<int64_t>(left, int64_t(rng() % 4));  // 0-length pieces too
      sizes.push_back(k);
      left -= k;
    }
    EXPECT_TRUE(cpu_gpu_agree("aten.split_with_sizes.default", {{"dim", dim}, {"split_sizes", sizes}}, {&x}));
  }
  HostTensor qkv = rnd(DType::F32, {32, 64, 384}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.split_with_sizes.default", {{"dim", -1}, {"split_sizes", {128, 128, 128}}}, {&qkv}));
}

// ---------------- index ops ----------------

TEST(CudaIndex, GatherLossShape) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(10);
  HostTensor logp = rnd(DType::F32, {2048, 256}, rng);
  HostTensor tgt = indices({2048, 1}, 256, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", 1}, {"sparse_grad", false}}, {&logp, &tgt}));
  HostTensor l10 = rnd(DType::F32, {128, 10}, rng);
  HostTensor t10 = indices({128, 1}, 10, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", 1}, {"sparse_grad", false}}, {&l10, &t10}));
}

TEST(CudaIndex, GatherRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (int it = 0; it < 40; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape s = random_shape(rng, r, 6);
    const int64_t dim = int64_t(rng() % r);
    Shape is = s;
    for (int d = 0; d < r; ++d) is[d] = d == dim ? 1 + int64_t(rng() % 8) : 1 + int64_t(rng() % s[d]);
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng), idx = indices(is, s[dim], rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", rng() % 2 ? dim : dim - r}, {"sparse_grad", false}}, {&x, &idx}))
        << ts::shape_str(s) << " by " << ts::shape_str(is) << " dim " << dim;
  }
  // 0-d corners (torch allows them with one element only).
  HostTensor v = rnd(DType::F32, {1}, rng), s0 = rnd(DType::I64, {}, rng);
  HostTensor i0(DType::I64, {}), i01(DType::I64, {1});
  i0.view.as<int64_t>()[0] = 0;
  i01.view.as<int64_t>()[0] = 0;
  EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", 0}, {"sparse_grad", false}}, {&v, &i0}));
  EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", -1}, {"sparse_grad", false}}, {&s0, &i0}));
  EXPECT_TRUE(cpu_gpu_agree("aten.gather.default", {{"dim", 0}, {"sparse_grad", false}}, {&s0, &i01}));
  EXPECT_TRUE(cpu_gpu_agree("aten.scatter.value", {{"dim", 0}, {"value", 7}}, {&s0, &i0}));
}

TEST(CudaIndex, ScatterValueOneHot) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  HostTensor z = random_tensor(DType::F32, {2048, 256}, rng, 0, 0);
  HostTensor tgt = indices({2048, 1}, 256, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.scatter.value", {{"dim", 1}, {"value", -1.0}}, {&z, &tgt}));
  HostTensor z10 = random_tensor(DType::F32, {128, 10}, rng, 0, 0);
  HostTensor t10 = indices({128, 1}, 10, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.scatter.value", {{"dim", 1}, {"value", -1.0}}, {&z10, &t10}));
  // Other dtypes and value kinds (int value, float value into ints, bool).
  for (DType dt : kDtypes) {
    HostTensor x = rnd(dt, {5, 7, 3}, rng);
    HostTensor idx = indices({4, 7, 2}, 5, rng);  // duplicates: all write one value
    EXPECT_TRUE(cpu_gpu_agree("aten.scatter.value", {{"dim", 0}, {"value", 3}}, {&x, &idx}));
    EXPECT_TRUE(cpu_gpu_agree("aten.scatter.value", {{"dim", -3}, {"value", -2.5}}, {&x, &idx}));
  }
}

// Index of shape `is` along dim with no repeats within any line along dim
// (is[dim] <= n): scatter.src's result is then defined.
HostTensor unique_indices(const Shape& is, int64_t dim, int64_t n, std::mt19937& rng) {
  HostTensor t(DType::I64, is);
  std::vector<int64_t> st(is.size(), 1);
  for (size_t d = is.size() - 1; d-- > 0;) st[d] = st[d + 1] * is[d + 1];
  const int64_t total = ts::shape_numel(is), len = is[dim];
  std::vector<int64_t> perm(n);
  for (int64_t e = 0; e < total; ++e) {
    if ((e / st[dim]) % len != 0) continue;  // one line per start element
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t k = 0; k < len; ++k) t.view.as<int64_t>()[e + k * st[dim]] = perm[k];
  }
  return t;
}

TEST(CudaIndex, ScatterSrcAndAddRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (int it = 0; it < 40; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape s = random_shape(rng, r, 6);
    const int64_t dim = int64_t(rng() % r);
    Shape is = s, ss = s;
    for (int d = 0; d < r; ++d) {
      is[d] = 1 + int64_t(rng() % s[d]);
      ss[d] = is[d] + int64_t(rng() % 3);  // src may be larger than index
    }
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng), src = rnd(dt, ss, rng);
    HostTensor uidx = unique_indices(is, dim, s[dim], rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.scatter.src", {{"dim", dim}}, {&x, &uidx, &src})) << ts::shape_str(s);
    if (dt == DType::Bool || dt == DType::U8) continue;  // refused for add
    Shape is2 = is;
    is2[dim] = 1 + int64_t(rng() % 8);  // many duplicates
    Shape ss2 = is2;
    HostTensor idx = indices(is2, s[dim], rng), src2 = rnd(dt, ss2, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.scatter_add.default", {{"dim", dim}}, {&x, &idx, &src2})) << ts::shape_str(s);
  }
}

TEST(CudaIndex, IndexSelectEmbeddings) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(14);
  HostTensor tok = rnd(DType::F32, {256, 128}, rng);
  HostTensor ids = indices({2048}, 256, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.index_select.default", {{"dim", 0}}, {&tok, &ids}));
  HostTensor pos = rnd(DType::F32, {64, 128}, rng);
  HostTensor ar(DType::I64, {64});
  for (int64_t i = 0; i < 64; ++i) ar.view.as<int64_t>()[i] = i;
  EXPECT_TRUE(cpu_gpu_agree("aten.index_select.default", {{"dim", 0}}, {&pos, &ar}));
}

TEST(CudaIndex, IndexSelectRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(15);
  for (int it = 0; it < 30; ++it) {
    const int r = 1 + int(rng() % 4);
    Shape s = random_shape(rng, r, 6);
    const int64_t dim = int64_t(rng() % r);
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng);
    Shape is = rng() % 4 == 0 ? Shape{} : Shape{int64_t(rng() % 9)};
    HostTensor idx = indices(is, s[dim], rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.index_select.default", {{"dim", rng() % 2 ? dim : dim - r}}, {&x, &idx}))
        << ts::shape_str(s);
  }
  HostTensor s0 = rnd(DType::F32, {}, rng);
  HostTensor i0 = indices({1}, 1, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.index_select.default", {{"dim", 0}}, {&s0, &i0}));
}

TEST(CudaIndex, IndexPutAccumulateEmbeddingBackward) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(16);
  HostTensor z = random_tensor(DType::F32, {256, 128}, rng, 0, 0);
  HostTensor ids = indices({2048}, 256, rng);
  HostTensor g = rnd(DType::F32, {2048, 128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.index_put.default", {{"accumulate", true}}, {&z, &ids, &g}));
  HostTensor zp = random_tensor(DType::F32, {64, 128}, rng, 0, 0);
  HostTensor ar(DType::I64, {64});
  for (int64_t i = 0; i < 64; ++i) ar.view.as<int64_t>()[i] = i;
  HostTensor gp = rnd(DType::F32, {64, 128}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.index_put.default", {{"accumulate", true}}, {&zp, &ar, &gp}));
  // Heavy duplication: 4096 rows into 3, onto a nonzero self.
  HostTensor x = rnd(DType::F32, {3, 5}, rng);
  HostTensor dup = indices({4096}, 3, rng);
  HostTensor gv = rnd(DType::F32, {4096, 5}, rng);
  EXPECT_TRUE(cpu_gpu_agree("aten.index_put.default", {{"accumulate", true}}, {&x, &dup, &gv},
                            ts_cuda_test::Tolerance{1e-5, 1e-4}));
}

TEST(CudaIndex, IndexPutRandom) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  for (int it = 0; it < 30; ++it) {
    const int r = 1 + int(rng() % 3);
    Shape s = random_shape(rng, r, 6);
    DType dt = pick_dtype(rng);
    HostTensor x = rnd(dt, s, rng);
    // Indices in [-D, D): negative ones count from the end.
    const int64_t D = s[0];
    Shape is = rng() % 3 == 0 ? Shape{int64_t(rng() % 3), 2} : Shape{int64_t(rng() % 9)};
    HostTensor idx = random_tensor(DType::I64, is, rng, -double(D), double(D));
    Shape vs = is;
    vs.insert(vs.end(), s.begin() + 1, s.end());
    HostTensor v = rnd(dt, vs, rng);
    if (dt != DType::Bool && dt != DType::U8) {
      EXPECT_TRUE(cpu_gpu_agree("aten.index_put.default", {{"accumulate", true}}, {&x, &idx, &v}))
          << ts::shape_str(s);
    }
    // Without accumulate, duplicates would race: one index per row.
    std::vector<int64_t> perm(D);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int64_t k = int64_t(rng() % (D + 1));
    HostTensor uidx(DType::I64, {k});
    for (int64_t i = 0; i < k; ++i) uidx.view.as<int64_t>()[i] = perm[i] - (rng() % 2 ? D : 0);
    Shape us = {k};
    us.insert(us.end(), s.begin() + 1, s.end());
    HostTensor uv = rnd(dt, us, rng);
    EXPECT_TRUE(cpu_gpu_agree("aten.index_put.default", {{"accumulate", false}}, {&x, &uidx, &uv})) << ts::shape_str(s);
  }
}

TEST(CudaIndex, RefusedAtFactory) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(18);
  HostTensor x = rnd(DType::Bool, {4, 3}, rng);
  HostTensor idx = indices({6}, 4, rng);
  HostTensor v = rnd(DType::Bool, {6, 3}, rng);
  // Accumulating bools has no atomic form: the factory must refuse it.
  EXPECT_THROW(cpu_gpu_agree("aten.index_put.default", {{"accumulate", true}}, {&x, &idx, &v}),
               ts::Error);
}

}  // namespace

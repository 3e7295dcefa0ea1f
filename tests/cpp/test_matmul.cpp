// aten.mm / aten.bmm / aten.addmm against naive double-precision products.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <iostream>

#include "op_test_util.h"

using namespace ts_test;
using ts::DType;
using ts::HostTensor;

namespace {

// C[b] = A[b] @ B[b] for row-major (M,K) and (K,N) blocks.
std::vector<float> ref_mm(const float* a, const float* b, int64_t B, int64_t M, int64_t K, int64_t N) {
  std::vector<float> c(B * M * N);
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(a[(z * M + i) * K + k]) * b[(z * K + k) * N + j];
        c[(z * M + i) * N + j] = float(s);
      }
  return c;
}

}  // namespace

TEST(Matmul, Mm) {
  std::mt19937 rng(1);
  std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {3, 5, 7}, {17, 1, 9}, {64, 33, 10}, {1, 129, 2}};
  for (auto [M, K, N] : sizes) {
    HostTensor a = random_f32({M, K}, rng), b = random_f32({K, N}, rng);
    std::vector<ts::TensorType> t;
    auto c = run_op("aten.mm.default", json::object(), {&a, &b}, &t);
    EXPECT_EQ(t[0].shape, (ts::Shape{M, N}));
    EXPECT_TRUE(all_close(c[0], ref_mm(f32(a), f32(b), 1, M, K, N)));
  }
}

TEST(Matmul, RealModelSizes) {
  std::mt19937 rng(2);
  // Forward fc1, and its two backward products.
  std::vector<std::array<int64_t, 3>> sizes = {{64, 9216, 128}, {128, 64, 9216}, {64, 128, 9216}};
  for (auto [M, K, N] : sizes) {
    HostTensor a = random_f32({M, K}, rng), b = random_f32({K, N}, rng);
    auto c = run_op("aten.mm.default", json::object(), {&a, &b});
    EXPECT_TRUE(all_close(c[0], ref_mm(f32(a), f32(b), 1, M, K, N), 1e-4f, 1e-3f));
  }
}

TEST(Matmul, Bmm) {
  std::mt19937 rng(3);
  std::vector<std::array<int64_t, 4>> sizes = {{1, 2, 3, 4}, {5, 7, 1, 3}, {3, 16, 9, 11}};
  for (auto [B, M, K, N] : sizes) {
    HostTensor a = random_f32({B, M, K}, rng), b = random_f32({B, K, N}, rng);
    std::vector<ts::TensorType> t;
    auto c = run_op("aten.bmm.default", json::object(), {&a, &b}, &t);
    EXPECT_EQ(t[0].shape, (ts::Shape{B, M, N}));
    EXPECT_TRUE(all_close(c[0], ref_mm(f32(a), f32(b), B, M, K, N)));
  }
}

TEST(Matmul, Addmm) {
  std::mt19937 rng(4);
  const int64_t M = 6, K = 5, N = 7;
  HostTensor a = random_f32({M, K}, rng), b = random_f32({K, N}, rng);
  std::vector<float> p = ref_mm(f32(a), f32(b), 1, M, K, N);
  std::vector<ts::Shape> self_shapes = {{N}, {M, N}, {1, N}, {M, 1}, {}, {1}};
  std::vector<std::pair<double, double>> ab = {{1, 1}, {0.5, 2}, {0, 3}, {-1, 0.25}};
  for (const auto& ss : self_shapes)
    for (auto [beta, alpha] : ab) {
      HostTensor s = random_f32(ss, rng);
      if (beta == 0) s.view.as<float>()[0] = std::numeric_limits<float>::quiet_NaN();  // ignored
      std::vector<float> want(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t si = ss.size() == 2 ? (ss[0] == 1 ? 0 : i) * ss[1] + (ss[1] == 1 ? 0 : j)
                                      : (ss.size() == 1 && ss[0] != 1 ? j : 0);
          double bias = beta == 0 ? 0.0 : beta * f32(s)[si];
          want[i * N + j] = float(bias + alpha * p[i * N + j]);
        }
      json attrs = {{"beta", beta}, {"alpha", alpha}};
      auto c = run_op("aten.addmm.default", attrs, {&s, &a, &b});
      EXPECT_TRUE(all_close(c[0], want)) << ts::shape_str(ss) << " beta " << beta << " alpha " << alpha;
    }
  // Integer-valued attrs, as exported for `addmm(b, x, w)` with defaults.
  HostTensor s = random_f32({N}, rng);
  auto c = run_op("aten.addmm.default", {{"beta", 1}, {"alpha", 1}}, {&s, &a, &b});
  for (int64_t i = 0; i < M * N; ++i) p[i] += f32(s)[i % N];
  EXPECT_TRUE(all_close(c[0], p));
}

TEST(Matmul, RunTwiceIsIdentical) {
  std::mt19937 rng(5);
  HostTensor s = random_f32({9}, rng), a = random_f32({8, 11}, rng), b = random_f32({11, 9}, rng);
  OpHarness h("aten.addmm.default", {{"beta", 0.5}, {"alpha", 2.0}}, {&s, &a, &b});
  auto c1 = h.run({&s, &a, &b});
  auto c2 = h.run({&s, &a, &b});
  h.run_into({&s, &a, &b}, c2);  // sum post-op must not accumulate across runs
  EXPECT_EQ(0, std::memcmp(f32(c1[0]), f32(c2[0]), c1[0].view.nbytes()));
}

TEST(Matmul, Errors) {
  auto T = [](ts::Shape s, DType d = DType::F32) { return ts::TensorType{d, s}; };
  json none = json::object();
  EXPECT_EQ(infer_error("aten.mm.default", none, {T({3, 4}), T({5, 6})}),
            "node 'n0' (aten.mm.default): inner dimensions differ: [3, 4] @ [5, 6]");
  EXPECT_EQ(infer_error("aten.mm.default", none, {T({3, 4, 1}), T({4, 6})}),
            "node 'n0' (aten.mm.default): self must be rank 2, got float32[3, 4, 1]");
  EXPECT_EQ(infer_error("aten.mm.default", none, {T({3, 4}), T({4, 6}, DType::I64)}),
            "node 'n0' (aten.mm.default): mat2 must be float32, got int64[4, 6]");
  EXPECT_EQ(infer_error("aten.bmm.default", none, {T({2, 3, 4}), T({3, 4, 5})}),
            "node 'n0' (aten.bmm.default): batch sizes differ: [2, 3, 4] and [3, 4, 5]");
  json ab = {{"beta", 1}, {"alpha", 1}};
  EXPECT_EQ(infer_error("aten.addmm.default", ab, {T({4}), T({3, 4}), T({4, 5})}),
            "node 'n0' (aten.addmm.default): self float32[4] is not broadcastable to [3, 5]");
  EXPECT_EQ(infer_error("aten.addmm.default", ab, {T({5}), T({3, 4}), T({5, 5})}),
            "node 'n0' (aten.addmm.default): inner dimensions differ: [3, 4] @ [5, 5]");
}

TEST(Matmul, TransposedOperandsAllFlags) {
  std::mt19937 rng(6);
  // (M, K, N) including the model's fc1 backward shapes.
  std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {3, 5, 7}, {17, 1, 9}, {64, 33, 10},
                                               {128, 64, 300}};
  for (auto [M, K, N] : sizes)
    for (int flags = 0; flags < 4; ++flags) {
      bool ta = flags & 1, tb = flags & 2;
      HostTensor a = random_f32({M, K}, rng), b = random_f32({K, N}, rng);
      // Store each operand as given (a) or transposed (a^T) per its flag.
      auto stored = [](const HostTensor& t, bool tr) {
        int64_t R = t.view.shape[0], C = t.view.shape[1];
        if (!tr) {
          HostTensor c(DType::F32, {R, C});
          std::memcpy(c.view.data, t.view.data, t.view.nbytes());
          return c;
        }
        HostTensor c(DType::F32, {C, R});
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) c.view.as<float>()[j * R + i] = f32(t)[i * C + j];
        return c;
      };
      HostTensor sa = stored(a, ta), sb = stored(b, tb);
      std::vector<ts::TensorType> t;
      auto c = run_op("trainstep.matmul", {{"trans_a", ta}, {"trans_b", tb}}, {&sa, &sb}, &t);
      EXPECT_EQ(t[0].shape, (ts::Shape{M, N}));
      EXPECT_TRUE(all_close(c[0], ref_mm(f32(a), f32(b), 1, M, K, N)))
          << M << "x" << K << "x" << N << " trans_a " << ta << " trans_b " << tb;
    }
}

TEST(Matmul, TransposedErrors) {
  auto T = [](ts::Shape s, DType d = DType::F32) { return ts::TensorType{d, s}; };
  const char* op = "trainstep.matmul";
  EXPECT_EQ(infer_error(op, {{"trans_a", true}, {"trans_b", false}}, {T({3, 4}), T({4, 6})}),
            "node 'n0' (trainstep.matmul): inner dimensions differ: a^T [4, 3] @ b [4, 6]");
  EXPECT_EQ(infer_error(op, {{"trans_a", false}, {"trans_b", true}}, {T({3, 4}), T({4, 6})}),
            "node 'n0' (trainstep.matmul): inner dimensions differ: a [3, 4] @ b^T [6, 4]");
  EXPECT_EQ(infer_error(op, {{"trans_a", false}}, {T({3, 4}), T({4, 6})}),
            "node 'n0' (trainstep.matmul): missing attribute 'trans_b'");
  EXPECT_EQ(infer_error(op, {{"trans_a", false}, {"trans_b", false}}, {T({2, 3, 4}), T({4, 6})}),
            "node 'n0' (trainstep.matmul): a must be rank 2, got float32[2, 3, 4]");
  EXPECT_EQ(infer_op(op, {{"trans_a", true}, {"trans_b", true}}, {T({4, 3}), T({6, 4})})[0].shape,
            (ts::Shape{3, 6}));
}

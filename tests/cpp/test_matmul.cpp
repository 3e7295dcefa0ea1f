// aten.mm / aten.bmm / aten.addmm against naive double-precision products.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <iostream>

#include "op_test_util.h"
#include "ops/gemm64.h"

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
            "node 'n0' (aten.mm.default): mat2 must be float32, float64 or bfloat16, got int64[4, 6]");
  EXPECT_EQ(infer_error("aten.mm.default", none, {T({3, 4}), T({4, 6}, DType::F64)}),
            "node 'n0' (aten.mm.default): self and mat2 must have the same dtype, got "
            "float32[3, 4] and float64[4, 6]");
  EXPECT_EQ(infer_op("aten.bmm.default", none, {T({2, 3, 4}, DType::F64), T({2, 4, 5}, DType::F64)})[0],
            (ts::TensorType{DType::F64, {2, 3, 5}}));
  EXPECT_EQ(infer_error("aten.bmm.default", none, {T({2, 3, 4}), T({3, 4, 5})}),
            "node 'n0' (aten.bmm.default): batch sizes differ: [2, 3, 4] and [3, 4, 5]");
  json ab = {{"beta", 1}, {"alpha", 1}};
  EXPECT_EQ(infer_error("aten.addmm.default", ab, {T({4}), T({3, 4}), T({4, 5})}),
            "node 'n0' (aten.addmm.default): self float32[4] is not broadcastable to [3, 5]");
  EXPECT_EQ(infer_error("aten.addmm.default", ab, {T({5}), T({3, 4}), T({5, 5})}),
            "node 'n0' (aten.addmm.default): inner dimensions differ: [3, 4] @ [5, 5]");
  EXPECT_EQ(infer_error("aten.addmm.default", ab,
                        {T({5}), T({3, 4}, DType::F64), T({4, 5}, DType::F64)}),
            "node 'n0' (aten.addmm.default): mat1 and self must have the same dtype, got "
            "float64[3, 4] and float32[5]");
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

// Rank 3: each batch's operands stored with their last two dims swapped per
// flag, in float32 (oneDNN) and float64 (Gemm64).
TEST(Matmul, BatchedTransposedOperandsAllFlags) {
  std::mt19937 rng(11);
  const int64_t B = 3, M = 5, K = 7, N = 4;
  for (DType dt : {DType::F32, DType::F64})
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      HostTensor a = random_f32({B, M, K}, rng), b = random_f32({B, K, N}, rng);
      // Stored per flag, converted to dt.
      auto stored = [&](const HostTensor& t, bool tr) {
        const int64_t R = t.view.shape[1], C = t.view.shape[2];
        HostTensor s(dt, tr ? ts::Shape{B, C, R} : ts::Shape{B, R, C});
        for (int64_t z = 0; z < B; ++z)
          for (int64_t i = 0; i < R; ++i)
            for (int64_t j = 0; j < C; ++j) {
              const float v = f32(t)[(z * R + i) * C + j];
              const int64_t at = tr ? (z * C + j) * R + i : (z * R + i) * C + j;
              if (dt == DType::F32)
                s.view.as<float>()[at] = v;
              else
                s.view.as<double>()[at] = v;
            }
        return s;
      };
      HostTensor sa = stored(a, ta), sb = stored(b, tb);
      std::vector<ts::TensorType> t;
      auto c = run_op("trainstep.matmul", {{"trans_a", ta}, {"trans_b", tb}}, {&sa, &sb}, &t);
      ASSERT_EQ(t[0].shape, (ts::Shape{B, M, N}));
      const auto want = ref_mm(f32(a), f32(b), B, M, K, N);
      for (int64_t i = 0; i < B * M * N; ++i) {
        const double got = dt == DType::F32 ? c[0].view.as<float>()[i] : c[0].view.as<double>()[i];
        ASSERT_NEAR(got, want[i], 1e-4) << "trans_a " << ta << " trans_b " << tb << " at " << i;
      }
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
            "node 'n0' (trainstep.matmul): a and b must both be rank 2 or both rank 3, got "
            "float32[2, 3, 4] and float32[4, 6]");
  EXPECT_EQ(infer_error(op, {{"trans_a", false}, {"trans_b", true}}, {T({2, 3, 4}), T({3, 6, 4})}),
            "node 'n0' (trainstep.matmul): batch sizes differ: [2, 3, 4] and [3, 6, 4]");
  EXPECT_EQ(infer_op(op, {{"trans_a", true}, {"trans_b", false}}, {T({5, 4, 3}), T({5, 4, 6})})[0].shape,
            (ts::Shape{5, 3, 6}));
  EXPECT_EQ(infer_op(op, {{"trans_a", true}, {"trans_b", true}}, {T({4, 3}), T({6, 4})})[0].shape,
            (ts::Shape{3, 6}));
}

// Gemm64 (the float64 product) against a naive triple loop: random sizes
// around the micro-tile and K-slice edges, every transpose flag, batches,
// alpha/beta; one thread and two give identical bits.
TEST(Gemm64, MatchesNaiveLoop) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> small(1, 40), big(1, 300);
  std::normal_distribution<double> nd;
  const int64_t MR = ts::Gemm64::MR, NR = ts::Gemm64::NR, KC = ts::Gemm64::KC;
  std::vector<std::array<int64_t, 4>> sizes = {
      {1, 1, 1, 1},         {1, MR, NR, 1},       {1, MR + 1, NR - 1, KC + 1},
      {1, 2 * MR - 1, 3 * NR + 5, 2 * KC + 3}, {2, 5, 7, 0}, {3, 4, 64, 16},
      {1, 129, 257, 65},    {1, 300, 37, 1}};
  for (int r = 0; r < 12; ++r)
    sizes.push_back({small(rng) % 3 + 1, big(rng), big(rng), r % 3 ? big(rng) : small(rng)});
  for (auto [B, M, N, K] : sizes)
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      std::vector<double> a(B * M * K), b(B * K * N), c0(B * M * N);
      for (auto& v : a) v = nd(rng);
      for (auto& v : b) v = nd(rng);
      for (auto& v : c0) v = nd(rng);
      for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {0.5, 1.0}, {-2.0, 0.25}}) {
        std::vector<double> want(B * M * N);
        for (int64_t z = 0; z < B; ++z)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double s = 0;
              for (int64_t k = 0; k < K; ++k) {
                double x = ta ? a[z * M * K + k * M + i] : a[z * M * K + i * K + k];
                double y = tb ? b[z * K * N + j * K + k] : b[z * K * N + k * N + j];
                s += x * y;
              }
              want[z * M * N + i * N + j] =
                  alpha * s + (beta == 0 ? 0.0 : beta * c0[z * M * N + i * N + j]);
            }
        std::vector<double> got[2];
        for (int th = 1; th <= 2; ++th) {
          got[th - 1] = c0;
          if (beta == 0) std::fill(got[th - 1].begin(), got[th - 1].end(), NAN);  // not read
          ts::Gemm64 g(B, M, N, K, ta, tb, th);
          g.run(a.data(), b.data(), got[th - 1].data(), alpha, beta);
        }
        double tol = 1e-13 * std::max<int64_t>(K, 1);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[0][i], want[i], tol * (1 + std::abs(want[i])))
              << B << "x" << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb
              << " alpha " << alpha << " beta " << beta << " at " << i;
        ASSERT_EQ(0, std::memcmp(got[0].data(), got[1].data(), sizeof(double) * want.size()))
            << B << "x" << M << "x" << N << "x" << K << ": 1 and 2 threads differ";
      }
    }
}

// aten.mm / addmm / bmm on float64 inputs go through Gemm64.
TEST(Gemm64, Float64Ops) {
  std::mt19937 rng(8);
  std::normal_distribution<double> nd;
  auto rnd = [&](ts::Shape s) {
    HostTensor t(DType::F64, s);
    for (int64_t i = 0; i < t.view.numel(); ++i) t.view.as<double>()[i] = nd(rng);
    return t;
  };
  const int64_t M = 7, K = 19, N = 23;
  HostTensor a = rnd({M, K}), b = rnd({K, N}), s = rnd({N});
  std::vector<ts::TensorType> t;
  auto c = run_op("aten.addmm.default", {{"beta", 0.5}, {"alpha", 2}}, {&s, &a, &b}, &t);
  ASSERT_EQ(t[0], (ts::TensorType{DType::F64, {M, N}}));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double p = 0;
      for (int64_t k = 0; k < K; ++k) p += a.view.as<double>()[i * K + k] * b.view.as<double>()[k * N + j];
      EXPECT_NEAR(c[0].view.as<double>()[i * N + j], 0.5 * s.view.as<double>()[j] + 2 * p, 1e-12);
    }
}

// Rough speed, printed (not asserted): 512^3 on one thread against a naive loop.
TEST(Gemm64, Speed) {
  const int64_t n = 512;
  std::vector<double> a(n * n, 1.0), b(n * n, 0.5), c(n * n), r(n * n);
  ts::Gemm64 g(1, n, n, n, false, false, 1);
  g.run(a.data(), b.data(), c.data());
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    g.run(a.data(), b.data(), c.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  auto t1 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += a[i * n + k] * b[k * n + j];
      r[i * n + j] = s;
    }
  auto t2 = std::chrono::steady_clock::now();
  const double f = 2.0 * n * n * n / 1e9;
  std::cout << "gemm64 512^3 1 thread: " << f / best
            << " GFLOP/s; naive loop: " << f / std::chrono::duration<double>(t2 - t1).count()
            << " GFLOP/s\n";
  EXPECT_EQ(c, r);
}

// SmallGemm against a double-precision product at every ISA level, the
// matmul ops on each forced candidate (oneDNN, SmallGemm, OpenBLAS), and the
// kernel-choice cache.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "io/atomic_file.h"
#include "isa_levels.h"
#include "op_test_util.h"
#include "ops/gemm_small.h"
#include "ops/kernel_choice.h"
#include "ops/openblas.h"
#include "test_util.h"

using namespace ts_test;

namespace {

// A temporary folder for the cache, removed after.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/trainstep-kc-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// alpha * op(A) @ op(B) + beta * C0 in double; a is stored (K,M) when ta,
// b (N,K) when tb.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<float>& c0, int64_t M, int64_t N, int64_t K,
                             bool ta, bool tb, float alpha, float beta) {
  std::vector<float> c(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      c[i * N + j] = float(alpha * s + (beta != 0 ? double(beta) * c0[i * N + j] : 0.0));
    }
  return c;
}

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(SmallGemm, MatchesDoubleProductAtEveryLevelWithTheSameBits) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int64_t> dim(1, 70);
  std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {8, 32, 1}, {6, 16, 256}, {33, 47, 3}};
  for (int i = 0; i < 12; ++i) sizes.push_back({dim(rng), dim(rng), 1 + dim(rng) * 3});
  for (const auto& mnk : sizes)
    for (int flags = 0; flags < 8; ++flags) {
      // Plain locals: clang 14 (the sanitizer build) cannot capture structured bindings.
      const int64_t M = mnk[0], N = mnk[1], K = mnk[2];
      const bool ta = flags & 1, tb = flags & 2, acc = flags & 4;
      const float alpha = acc ? 0.75f : 1.f, beta = acc ? -0.5f : 0.f;
      auto a = random_vec(M * K, rng), b = random_vec(K * N, rng), c0 = random_vec(M * N, rng);
      const auto want = reference(a, b, c0, M, N, K, ta, tb, alpha, beta);
      std::vector<std::vector<float>> per_level;
      isatest::for_each_isa([&](ts::CpuIsa) {
        // Without beta C is written, not read: NaN there must not leak in.
        std::vector<float> c = acc ? c0 : std::vector<float>(M * N, NAN);
        ts::SmallGemm g(M, N, K, ta, tb, 2);
        g.run(a.data(), b.data(), c.data(), alpha, beta);
        for (int64_t e = 0; e < M * N; ++e)
          ASSERT_NEAR(c[e], want[e], 1e-5 * K + 1e-5 * std::fabs(want[e]))
              << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb << " at " << e;
        per_level.push_back(std::move(c));
      });
      for (size_t l = 1; l < per_level.size(); ++l)
        EXPECT_EQ(0, std::memcmp(per_level[0].data(), per_level[l].data(), sizeof(float) * M * N))
            << "level " << l << " differs from scalar, " << M << "x" << N << "x" << K << " flags " << flags;
    }
}

// The matmul ops give the product whichever candidate runs, at one thread
// (OpenBLAS is offered only there), with every transposition; the kernel
// built is the forced one.
TEST(SmallGemm, MatmulOpsOnEachForcedKernel) {
  ASSERT_TRUE(ts::OpenBlasGemm::suits(1, 1, 1)) << "libopenblas.so.0 is missing (make deps installs it)";
  for (const char* kernel : {"onednn", "small_k", "openblas"}) {
    EnvVar force("TRAINSTEP_KERNELS", kernel);
    SCOPED_TRACE(kernel);
    std::mt19937 rng(7);
    const int64_t M = 37, N = 29, K = 32;
    auto run1 = [&](const char* op, const json& attrs,
                    const std::vector<const ts::HostTensor*>& in) {
      OpHarness h(op, attrs, in, 1);
      const auto c = h.kernel().choices();
      EXPECT_TRUE(c.size() == 1 && c[0]->names[c[0]->pick] == kernel) << op;
      return std::move(h.run(in)[0]);
    };
    // trainstep.matmul with each operand stored transposed or not (the
    // LSTM's weight gradients are a^T @ b).
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      ts::HostTensor a = random_f32(ta ? ts::Shape{K, M} : ts::Shape{M, K}, rng);
      ts::HostTensor b = random_f32(tb ? ts::Shape{N, K} : ts::Shape{K, N}, rng);
      auto c = run1("trainstep.matmul", {{"trans_a", ta}, {"trans_b", tb}}, {&a, &b});
      std::vector<float> av(f32(a), f32(a) + K * M), bv(f32(b), f32(b) + K * N);
      EXPECT_TRUE(all_close(c, reference(av, bv, {}, M, N, K, ta, tb, 1, 0))) << ta << tb;
    }
    // addmm with a row bias, alpha and beta.
    ts::HostTensor a = random_f32({M, K}, rng), b = random_f32({K, N}, rng);
    ts::HostTensor bias = random_f32({N}, rng);
    auto d = run1("aten.addmm.default", {{"alpha", 2.0}, {"beta", 0.5}}, {&bias, &a, &b});
    std::vector<float> a2(f32(a), f32(a) + M * K), bv(f32(b), f32(b) + K * N), c0(M * N);
    for (int64_t i = 0; i < M * N; ++i) c0[i] = f32(bias)[i % N];
    EXPECT_TRUE(all_close(d, reference(a2, bv, c0, M, N, K, false, false, 2.f, 0.5f)));
  }
}

TEST(KernelChoice, CachesPicksInAFileAndIgnoresADamagedOne) {
  TempDir dir;
  EnvVar cache("TRAINSTEP_CACHE", dir.path.string());
  EnvVar measure("TRAINSTEP_KERNELS", "measure");
  ts::forget_kernel_choices();
  int slow_calls = 0, fast_calls = 0;
  std::vector<ts::KernelCandidate> c = {
      {"onednn", [&] { ++slow_calls; std::this_thread::sleep_for(std::chrono::milliseconds(2)); }},
      {"small_k", [&] { ++fast_calls; }}};
  ts::KernelChoice first = ts::choose_kernel("test slow-vs-fast", 1, c);
  EXPECT_EQ(first.from, ts::KernelChoice::From::Measured);
  EXPECT_EQ(first.names[first.pick], "small_k");
  EXPECT_GT(fast_calls, 0);
  const std::string path = ts::kernel_choice_cache_path();
  EXPECT_EQ(path, (dir.path / "kernel-choices.json").string());
  ASSERT_TRUE(std::filesystem::exists(path));

  // A new process (forgotten memo) reads the pick without running anything.
  ts::forget_kernel_choices();
  slow_calls = fast_calls = 0;
  ts::KernelChoice again = ts::choose_kernel("test slow-vs-fast", 1, c);
  EXPECT_EQ(again.from, ts::KernelChoice::From::Cache);
  EXPECT_EQ(again.pick, first.pick);
  EXPECT_EQ(again.us, first.us);
  EXPECT_EQ(slow_calls + fast_calls, 0);
  EXPECT_NE(again.describe().find("cached"), std::string::npos);

  // An edited entry fails the checksum: measured again, file rewritten.
  std::string text = ts::read_file(path);
  text.replace(text.find("\"pick\": 1"), 9, "\"pick\": 0");
  ts::write_file_atomic(path, text.data(), text.size());
  ts::forget_kernel_choices();
  ts::KernelChoice remeasured = ts::choose_kernel("test slow-vs-fast", 1, c);
  EXPECT_EQ(remeasured.from, ts::KernelChoice::From::Measured);
  EXPECT_EQ(remeasured.names[remeasured.pick], "small_k");
  EXPECT_GT(fast_calls, 0);
  ts::forget_kernel_choices();
  EXPECT_EQ(ts::choose_kernel("test slow-vs-fast", 1, c).from, ts::KernelChoice::From::Cache);

  // Garbage in the file: the same.
  ts::write_file_atomic(path, "{not json", 9);
  ts::forget_kernel_choices();
  EXPECT_EQ(ts::choose_kernel("test slow-vs-fast", 1, c).from,
            ts::KernelChoice::From::Measured);
}

TEST(KernelChoice, TheDefaultKeepsItsPlaceUnlessBeaten) {
  TempDir dir;
  EnvVar cache("TRAINSTEP_CACHE", dir.path.string());
  EnvVar measure("TRAINSTEP_KERNELS", "measure");
  std::vector<ts::KernelCandidate> c = {
      {"onednn", [] {}},
      {"small_k", [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }}};
  ts::KernelChoice k = ts::choose_kernel("test fast-default", 1, c);
  EXPECT_EQ(k.pick, 0);
  ASSERT_EQ(k.us.size(), 2u);
  EXPECT_GT(k.us[1], k.us[0]);
}

TEST(KernelChoice, ForcedByTheEnvironment) {
  TempDir dir;
  EnvVar cache("TRAINSTEP_CACHE", dir.path.string());
  int calls = 0;
  std::vector<ts::KernelCandidate> c = {{"onednn", [&] { ++calls; }},
                                        {"small_k", [&] { ++calls; }}};
  {
    EnvVar force("TRAINSTEP_KERNELS", "small_k");
    ts::KernelChoice k = ts::choose_kernel("test forced", 1, c);
    EXPECT_EQ(k.from, ts::KernelChoice::From::Forced);
    EXPECT_EQ(k.names[k.pick], "small_k");
    EXPECT_EQ(k.describe(), "small_k (forced by TRAINSTEP_KERNELS)");
    // A forced name the computation does not offer leaves the default.
    EXPECT_EQ(ts::choose_kernel("test forced", 1, {c[0]}).pick, 0);
  }
  {
    EnvVar force("TRAINSTEP_KERNELS", "default");
    EXPECT_EQ(ts::choose_kernel("test forced", 1, c).pick, 0);
  }
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.path / "kernel-choices.json"));
  EnvVar bad("TRAINSTEP_KERNELS", "fastest");
  try {
    ts::choose_kernel("test forced", 1, c);
    FAIL() << "an unknown kernel name was accepted";
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find("TRAINSTEP_KERNELS=fastest: unknown kernel"),
              std::string::npos)
        << e.what();
  }
}

TEST(KernelChoice, NoCacheFileWhenTheCacheIsOff) {
  EnvVar cache("TRAINSTEP_CACHE", "");
  EXPECT_EQ(ts::kernel_choice_cache_path(), "");
  EnvVar measure("TRAINSTEP_KERNELS", "measure");
  ts::KernelChoice k = ts::choose_kernel("test no cache", 1, {{"onednn", [] {}}});
  EXPECT_EQ(k.from, ts::KernelChoice::From::Measured);
}

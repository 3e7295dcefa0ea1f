#include "ops/gemm64.h"

#include <algorithm>

#include "ops/parallel.h"

namespace ts {
namespace {

constexpr int MR = Gemm64::MR;
constexpr int NR = Gemm64::NR;
constexpr int64_t KC = Gemm64::KC;
// Block sizes, whole micro-tiles: an A block MC x KC (about 256 KiB) stays
// in L2, a B panel KC x NC (1 MiB) in L2/L3. Each kernel holds one pair
// per thread, so these bound its memory too.
constexpr int64_t MC_MAX = 128 / MR * MR;
constexpr int64_t NC_MAX = 512 / NR * NR;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
int64_t ceil_div(int64_t v, int64_t m) { return (v + m - 1) / m; }

// How the micro-kernel stores its tile: C = alpha*acc; C = beta*C + alpha*acc;
// C += alpha*acc.
enum Store { kSet, kScale, kAdd };

// acc = sum over p < kc of ap[p][0..MR) (x) bp[p][0..NR), then stored into
// the mr x nr corner of C (ldc apart). ap: MR doubles per k, bp: NR per k.
template <Store S, bool Full>
inline void micro(int64_t kc, const double* __restrict ap, const double* __restrict bp,
                  double* __restrict c, int64_t ldc, int mr, int nr, double alpha, double beta) {
  double acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = 0.0;
  for (int64_t p = 0; p < kc; ++p) {
    const double* a = ap + p * MR;
    const double* b = bp + p * NR;
    for (int i = 0; i < MR; ++i) {
      const double ai = a[i];
#pragma omp simd
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * b[j];
    }
  }
  const int rows = Full ? MR : mr;
  const int cols = Full ? NR : nr;
  for (int i = 0; i < rows; ++i) {
    double* ci = c + i * ldc;
    if (S == kSet) {
#pragma omp simd
      for (int j = 0; j < cols; ++j) ci[j] = alpha * acc[i][j];
    } else if (S == kScale) {
#pragma omp simd
      for (int j = 0; j < cols; ++j) ci[j] = beta * ci[j] + alpha * acc[i][j];
    } else {
#pragma omp simd
      for (int j = 0; j < cols; ++j) ci[j] += alpha * acc[i][j];
    }
  }
}

template <Store S>
inline void micro_any(int64_t kc, const double* ap, const double* bp, double* c, int64_t ldc,
                      int mr, int nr, double alpha, double beta) {
  if (mr == MR && nr == NR)
    micro<S, true>(kc, ap, bp, c, ldc, mr, nr, alpha, beta);
  else
    micro<S, false>(kc, ap, bp, c, ldc, mr, nr, alpha, beta);
}

}  // namespace

Gemm64::Gemm64(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
               int threads)
    : batch_(batch), m_(m), n_(n), k_(k), ta_(trans_a), tb_(trans_b),
      threads_(std::max(threads, 1)) {
  if (batch_ <= 0 || m_ <= 0 || n_ <= 0) return;  // nothing to write
  mc_ = std::min(MC_MAX, round_up(m_, MR));
  nc_ = std::min(NC_MAX, round_up(n_, NR));
  const double flops = 2.0 * double(batch_) * double(m_) * double(n_) * double(k_);
  // Worth a team: enough work for each thread to pay for the fork.
  const bool want_parallel = threads_ > 1 && k_ > 0 && flops >= double(1 << 18) * threads_;
  if (want_parallel) {
    // Cut blocks smaller (columns first: each row block repacks B) until
    // every thread has one, as far as the micro-tiles allow.
    auto blocks = [&] { return batch_ * ceil_div(m_, mc_) * ceil_div(n_, nc_); };
    while (blocks() < threads_ && nc_ > 4 * NR) nc_ = round_up(ceil_div(nc_, 2), NR);
    while (blocks() < threads_ && mc_ > MR) mc_ = round_up(ceil_div(mc_, 2), MR);
  }
  mblocks_ = ceil_div(m_, mc_);
  nblocks_ = ceil_div(n_, nc_);
  // A task is one column block of one batch and a run of row blocks, so a
  // packed B panel serves every row block of the run. Serial: one run of
  // all; parallel: runs cut so that every thread gets a task.
  mgroups_ = 1;
  if (want_parallel)
    mgroups_ = std::min(mblocks_, ceil_div(threads_, batch_ * nblocks_));
  parallel_ = want_parallel && batch_ * nblocks_ * mgroups_ > 1;
  if (!parallel_) threads_ = 1;
  const int64_t kc = std::min(KC, std::max<int64_t>(k_, 1));
  apack_size_ = size_t(round_up(mc_, MR) * kc);
  bpack_size_ = size_t(round_up(nc_, NR) * kc);
  // Each thread's part starts on a 64-byte boundary (8 doubles).
  apack_size_ = size_t(round_up(int64_t(apack_size_), 8));
  bpack_size_ = size_t(round_up(int64_t(bpack_size_), 8));
  if (k_ > 0)
    pack_ = Buffer(sizeof(double) * size_t(threads_) * (apack_size_ + bpack_size_));
}

// dst[s][p][r] = A(i0 + s*MR + r, k0 + p), zero past row mc.
void Gemm64::pack_a(const double* a, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                    double* dst) const {
  for (int64_t s = 0; s * MR < mc; ++s) {
    double* d = dst + s * kc * MR;
    const int64_t r0 = i0 + s * MR;
    const int rows = int(std::min<int64_t>(MR, mc - s * MR));
    if (!ta_) {
      // A(i, k) = a[i*K + k]: rows are contiguous in k.
      for (int r = 0; r < rows; ++r) {
        const double* src = a + (r0 + r) * k_ + k0;
        for (int64_t p = 0; p < kc; ++p) d[p * MR + r] = src[p];
      }
      for (int r = rows; r < MR; ++r)
        for (int64_t p = 0; p < kc; ++p) d[p * MR + r] = 0.0;
    } else {
      // A(i, k) = a[k*M + i]: the MR values of one k are contiguous.
      for (int64_t p = 0; p < kc; ++p) {
        const double* src = a + (k0 + p) * m_ + r0;
        double* dp = d + p * MR;
        for (int r = 0; r < rows; ++r) dp[r] = src[r];
        for (int r = rows; r < MR; ++r) dp[r] = 0.0;
      }
    }
  }
}

// dst[s][p][c] = B(k0 + p, j0 + s*NR + c), zero past column nc.
void Gemm64::pack_b(const double* b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                    double* dst) const {
  for (int64_t s = 0; s * NR < nc; ++s) {
    double* d = dst + s * kc * NR;
    const int64_t c0 = j0 + s * NR;
    const int cols = int(std::min<int64_t>(NR, nc - s * NR));
    if (!tb_) {
      // B(k, j) = b[k*N + j]: the NR values of one k are contiguous.
      for (int64_t p = 0; p < kc; ++p) {
        const double* src = b + (k0 + p) * n_ + c0;
        double* dp = d + p * NR;
        if (cols == NR) {
#pragma omp simd
          for (int c = 0; c < NR; ++c) dp[c] = src[c];
        } else {
          for (int c = 0; c < cols; ++c) dp[c] = src[c];
          for (int c = cols; c < NR; ++c) dp[c] = 0.0;
        }
      }
    } else {
      // B(k, j) = b[j*K + k]: columns of op(B) are contiguous in k.
      for (int c = 0; c < cols; ++c) {
        const double* src = b + (c0 + c) * k_ + k0;
        for (int64_t p = 0; p < kc; ++p) d[p * NR + c] = src[p];
      }
      for (int c = cols; c < NR; ++c)
        for (int64_t p = 0; p < kc; ++p) d[p * NR + c] = 0.0;
    }
  }
}

// Row blocks [ib0, ib1) of column block jb of C[z], over all of K: per K
// slice, B's panel is packed once, then each row block's A.
void Gemm64::block(int64_t z, int64_t ib0, int64_t ib1, int64_t jb, const double* a,
                   const double* b, double* c, double alpha, double beta, double* apack,
                   double* bpack) const {
  const double* az = a + z * m_ * k_;
  const double* bz = b + z * k_ * n_;
  double* cz = c + z * m_ * n_;
  const int64_t j0 = jb * nc_, nc = std::min(nc_, n_ - j0);
  for (int64_t k0 = 0; k0 < k_; k0 += KC) {
    const int64_t kc = std::min(KC, k_ - k0);
    pack_b(bz, k0, kc, j0, nc, bpack);
    const Store st = k0 > 0 || beta == 1.0 ? kAdd : beta == 0.0 ? kSet : kScale;
    for (int64_t ib = ib0; ib < ib1; ++ib) {
      const int64_t i0 = ib * mc_, mc = std::min(mc_, m_ - i0);
      pack_a(az, i0, mc, k0, kc, apack);
      for (int64_t jr = 0; jr < nc; jr += NR) {
        const double* bp = bpack + (jr / NR) * kc * NR;
        const int nr = int(std::min<int64_t>(NR, nc - jr));
        for (int64_t ir = 0; ir < mc; ir += MR) {
          const double* ap = apack + (ir / MR) * kc * MR;
          const int mr = int(std::min<int64_t>(MR, mc - ir));
          double* cp = cz + (i0 + ir) * n_ + j0 + jr;
          switch (st) {
            case kSet: micro_any<kSet>(kc, ap, bp, cp, n_, mr, nr, alpha, beta); break;
            case kScale: micro_any<kScale>(kc, ap, bp, cp, n_, mr, nr, alpha, beta); break;
            case kAdd: micro_any<kAdd>(kc, ap, bp, cp, n_, mr, nr, alpha, beta); break;
          }
        }
      }
    }
  }
}

void Gemm64::run(const double* a, const double* b, double* c, double alpha, double beta) {
  if (mblocks_ == 0) return;  // C is empty
  if (k_ == 0) {
    // The product is zeros: C = beta * C (C = 0 when beta is 0).
    const int64_t n = batch_ * m_ * n_;
    if (beta == 0.0)
      std::fill(c, c + n, 0.0);
    else if (beta != 1.0)
      for (int64_t i = 0; i < n; ++i) c[i] *= beta;
    return;
  }
  const int64_t tasks = batch_ * nblocks_ * mgroups_;
  double* base = static_cast<double*>(pack_.data());
  parallel_region(
      parallel_,
      [&](int t, int nt) {
        double* apack = base + size_t(t) * (apack_size_ + bpack_size_);
        double* bpack = apack + apack_size_;
        for (int64_t q = t; q < tasks; q += nt) {
          const int64_t z = q / (nblocks_ * mgroups_);
          const int64_t r = q % (nblocks_ * mgroups_);
          const int64_t grp = r / nblocks_, jb = r % nblocks_;
          int64_t ib0, ib1;
          split_range(mblocks_, int(grp), int(mgroups_), ib0, ib1);
          block(z, ib0, ib1, jb, a, b, c, alpha, beta, apack, bpack);
        }
      },
      threads_);
}

}  // namespace ts

// Kernels chosen by measurement. Where one computation has several
// implementations (a GEMM on oneDNN's matmul, OpenBLAS or SmallGemm), the op's
// make() times each on scratch data of the node's shape and keeps the
// fastest for this machine, ISA level and thread count.
//
// Picks are cached by key, in the process and in a file
// (kernel_choice_cache_path()), so every later compile on this machine picks
// the same without measuring: a resumed run, or a second process whose
// results are compared bit for bit with the first, computes the same bits.
// The file carries a checksum; a damaged or foreign one is ignored and
// rewritten (it is a cache: measuring again is always correct).
//
// TRAINSTEP_KERNELS=measure (default) | default | NAME forces the first
// candidate ("default") or the candidate called NAME wherever one is
// (tests run each path on any machine this way); unknown values fail.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"
#include "trainstep/bench.h"  // kernel_choice_cache_path, declared once for the library and its users

namespace ts {

struct KernelCandidate {
  std::string name;
  std::function<void()> run;  // one call on scratch data (never the step's)
};

struct KernelChoice {
  std::string key;  // what was measured, e.g. "gemm m=1024 n=256 k=32 a^T"
  std::vector<std::string> names;
  std::vector<double> us;  // per candidate, microseconds per call; empty when forced
  int pick = 0;
  // Only: one implementation, nothing measured (a bfloat16 oneDNN
  // primitive); its name says which, for bench --profile.
  enum class From { Measured, Cache, Forced, Only } from = From::Measured;
  std::string describe() const;  // "small_k (onednn 241.6 us, small_k 156.6 us; cached)"
};

// The choice of a kernel that had no alternative: `name` (e.g. "onednn
// brg:avx512_core_amx_bf16") computes `key`.
KernelChoice only_choice(const std::string& key, const std::string& name);

// Picks among candidates (at least one; the first is the default, which
// keeps its place unless another is at least 3 % faster). `key` names the
// computation and shape; the ISA level, threads and CPU are added here.
KernelChoice choose_kernel(const std::string& key, int threads,
                           const std::vector<KernelCandidate>& candidates);

// Forgets the in-process picks (tests: the next choose reads the file).
void forget_kernel_choices();

// choose_kernel over kernels built on demand: each candidate's kernel is
// made at its first timed call and run on zeroed scratch tensors of the
// node's input types and `outs` (never the step's data; the arithmetic
// takes the same time whatever the values), so a cached or forced pick
// builds nothing. `built` is the pick's kernel if measuring made it.
struct LazyCandidate {
  std::string name;
  std::function<std::unique_ptr<Kernel>()> make;
};
struct LazyChoice {
  KernelChoice choice;
  std::unique_ptr<Kernel> built;
};
LazyChoice choose_kernel_lazily(const std::string& key, const KernelCtx& k,
                                const std::vector<TensorType>& outs,
                                const std::vector<LazyCandidate>& candidates);

// A kernel picked by choose_kernel, reporting its choices (bench
// --profile): one, or one per part it computes (a convolution backward's
// input and weight gradients).
class ChosenKernel : public Kernel {
 public:
  ChosenKernel(std::unique_ptr<Kernel> impl, KernelChoice choice) : impl_(std::move(impl)) {
    choices_.push_back(std::move(choice));
  }
  ChosenKernel(std::unique_ptr<Kernel> impl, std::vector<KernelChoice> choices)
      : impl_(std::move(impl)), choices_(std::move(choices)) {}
  void run(const Tensor* in, Tensor* out) override { impl_->run(in, out); }
  std::vector<const KernelChoice*> choices() const override {
    std::vector<const KernelChoice*> r;
    for (const KernelChoice& c : choices_) r.push_back(&c);
    return r;
  }

 private:
  std::unique_ptr<Kernel> impl_;
  std::vector<KernelChoice> choices_;
};

}  // namespace ts

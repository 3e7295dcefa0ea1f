#include "runtime/thread_choice.h"

#include <omp.h>

namespace ts {
namespace {

// A kernel built for one thread, run with OpenMP's thread count at one
// (oneDNN and parallel.h's helpers read it; the helpers then take their
// serial path, which allocates nothing), then set back.
class OneThreadKernel : public Kernel {
 public:
  OneThreadKernel(std::unique_ptr<Kernel> impl, int threads)
      : impl_(std::move(impl)), threads_(threads) {}
  void run(const Tensor* in, Tensor* out) override {
    omp_set_num_threads(1);
    impl_->run(in, out);
    omp_set_num_threads(threads_);
  }
  std::vector<const KernelChoice*> choices() const override { return impl_->choices(); }

 private:
  std::unique_ptr<Kernel> impl_;
  int threads_;
};

}  // namespace

bool runs_on_one_thread(const OpDef& def, int threads, size_t io_bytes) {
  return threads > 1 && io_bytes <= kOneThreadMaxBytes && def.comm == CommRole::None;
}

std::unique_ptr<Kernel> make_node_kernel(const OpDef& def, const KernelCtx& k, size_t io_bytes) {
  if (!runs_on_one_thread(def, k.threads, io_bytes)) return make_kernel(def, k);
  const KernelCtx one{k.node, k.outputs, 1, k.collective};
  return std::make_unique<OneThreadKernel>(make_kernel(def, one), k.threads);
}

}  // namespace ts

// The data-parallel step's gradient all-reduce, as two nodes the compiler
// inserts (passes/data_parallel.h) between the backward and the optimizer
// update:
//   trainstep.all_reduce_start(g0, g1, ...) -> (bucket, request)
//     packs one bucket's gradients into a flat buffer and starts summing it
//     over the ranks; returns at once.
//   trainstep.all_reduce_wait(bucket, request) -> (g0', g1', ...)
//     waits for the sum and unpacks it, times 1/ranks: the average.
// The bucket value stays live from start to wait (it is the wait's input),
// so the memory plan gives no other value its bytes while the collective
// writes them. Without overlap (attr overlap = false) the start only packs
// and the wait runs the whole reduction itself.
#include <cstring>

#include "ops/op.h"
#include "trainstep/collective.h"

namespace ts {

namespace {

constexpr int64_t kNoRequest = -1;     // one rank: nothing to reduce
constexpr int64_t kReduceInWait = -2;  // overlap off

std::vector<TensorType> start_infer(const NodeCtx& ctx) {
  if (ctx.num_inputs() < 1) ctx.fail("needs at least one gradient");
  const DType t = ctx.input(0).dtype;
  if (t != DType::F32 && t != DType::F64) ctx.fail("gradients must be float32 or float64");
  int64_t n = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != t) ctx.fail("a bucket's gradients must share one dtype");
    n += ctx.input(i).numel();
  }
  return {TensorType{t, {n}}, TensorType{DType::I64, {}}};
}

class StartKernel : public Kernel {
 public:
  explicit StartKernel(const KernelCtx& k)
      : what_("all-reduce '" + k.node.node() + "'"), coll_(k.collective),
        overlap_(!k.node.has_attr("overlap") || k.node.attr_bool("overlap")) {
    for (int i = 0; i < k.node.num_inputs(); ++i) bytes_.push_back(k.node.input(i).nbytes());
    dtype_ = k.node.input(0).dtype;
    count_ = static_cast<size_t>(k.outputs[0].numel());
  }
  void run(const Tensor* in, Tensor* out) override {
    char* dst = static_cast<char*>(out[0].data);
    for (size_t i = 0; i < bytes_.size(); ++i) {
      std::memcpy(dst, in[i].data, bytes_[i]);
      dst += bytes_[i];
    }
    int64_t req = kNoRequest;
    if (coll_ && coll_->size() > 1)
      req = overlap_ ? coll_->all_reduce(out[0].data, count_, dtype_, ReduceOp::Sum, what_.c_str())
                     : kReduceInWait;
    *out[1].as<int64_t>() = req;
  }

 private:
  std::string what_;
  Collective* coll_;
  bool overlap_;
  std::vector<size_t> bytes_;
  DType dtype_ = DType::F32;
  size_t count_ = 0;
};

std::unique_ptr<Kernel> start_make(const KernelCtx& k) { return std::make_unique<StartKernel>(k); }

// attrs: shapes, one per gradient, in the bucket's order.
std::vector<TensorType> wait_infer(const NodeCtx& ctx) {
  ctx.expect_inputs(2);
  const TensorType& b = ctx.input(0);
  if (b.shape.size() != 1) ctx.fail("the bucket must be 1-d");
  ctx.expect_dtype(1, DType::I64);
  if (!ctx.attrs().contains("shapes") || !ctx.attrs()["shapes"].is_array())
    ctx.fail("needs attr 'shapes' (a list of shapes)");
  std::vector<TensorType> outs;
  int64_t n = 0;
  for (const auto& s : ctx.attrs()["shapes"]) {
    if (!s.is_array()) ctx.fail("attr 'shapes' holds a non-list");
    Shape sh;
    for (const auto& d : s) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) ctx.fail("attr 'shapes' holds a bad dim");
      sh.push_back(d.get<int64_t>());
    }
    outs.push_back({b.dtype, sh});
    n += outs.back().numel();
  }
  if (outs.empty() || n != b.shape[0])
    ctx.fail("the shapes hold " + std::to_string(n) + " elements, the bucket " +
             std::to_string(b.shape[0]));
  return outs;
}

template <class T>
void unpack(const T* src, const Tensor* out, size_t n_out, T scale) {
  for (size_t i = 0; i < n_out; ++i) {
    const int64_t n = out[i].numel();
    if (out[i].data) {
      T* d = out[i].as<T>();
      for (int64_t k = 0; k < n; ++k) d[k] = src[k] * scale;
    }
    src += n;
  }
}

class WaitKernel : public Kernel {
 public:
  explicit WaitKernel(const KernelCtx& k)
      : what_("all-reduce '" + k.node.node() + "'"), coll_(k.collective),
        dtype_(k.node.input(0).dtype), count_(static_cast<size_t>(k.node.input(0).numel())),
        n_out_(k.outputs.size()) {}
  void run(const Tensor* in, Tensor* out) override {
    // One process (no collective, or a group of one): the bucket is the sum.
    const bool many = coll_ && coll_->size() > 1;
    const int64_t req = *in[1].as<int64_t>();
    if (many && req >= 0) coll_->wait(req);
    if (many && req == kReduceInWait)
      coll_->all_reduce_now(in[0].data, count_, dtype_, ReduceOp::Sum, what_.c_str());
    const double ranks = many ? coll_->size() : 1;
    if (dtype_ == DType::F64)
      unpack<double>(in[0].as<double>(), out, n_out_, 1.0 / ranks);
    else
      unpack<float>(in[0].as<float>(), out, n_out_, static_cast<float>(1.0 / ranks));
  }

 private:
  std::string what_;
  Collective* coll_;
  DType dtype_;
  size_t count_, n_out_;
};

std::unique_ptr<Kernel> wait_make(const KernelCtx& k) { return std::make_unique<WaitKernel>(k); }

}  // namespace

void register_all_reduce_ops(OpRegistry& r) {
  OpDef start{"trainstep.all_reduce_start",
              "packs a bucket of float gradients and starts summing it over the ranks (made by the "
              "data-parallel pass; outputs the bucket and a request)",
              &start_infer, &start_make};
  start.comm = CommRole::Start;
  r.add(std::move(start));
  OpDef wait{"trainstep.all_reduce_wait",
             "waits for a bucket's sum and unpacks it averaged over the ranks (attr shapes; made "
             "by the data-parallel pass)",
             &wait_infer, &wait_make};
  wait.comm = CommRole::Wait;
  r.add(std::move(wait));
}

}  // namespace ts

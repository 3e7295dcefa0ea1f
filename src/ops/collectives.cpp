// The data-parallel step's collectives, as start/wait node pairs the
// compiler inserts (passes/data_parallel.h, passes/shard_optimizer.h):
//   trainstep.all_reduce_start(g0, g1, ...) -> (bucket, request)
//   trainstep.all_reduce_wait(bucket, request) -> (g0', g1', ...)
//     sums a bucket of gradients over the ranks; the wait unpacks the
//     average (times 1/ranks).
//   trainstep.reduce_scatter_start(g0, g1, ...) -> (bucket, request)
//   trainstep.reduce_scatter_wait(bucket, request) -> (this rank's g', ...)
//     the same, but each rank gets only its own chunk of the bucket (the
//     gradients of the parameters it updates; attrs counts, rank).
//   trainstep.all_gather_start(p0, p1, ...) -> (bucket, request)
//   trainstep.all_gather_wait(bucket, request) -> (every rank's p, ...)
//     each rank's new parameters (its chunk) reach every rank.
// A start packs its inputs and returns at once; its wait blocks for the
// result. The bucket stays live from start to wait (it is the wait's
// input), so the memory plan gives no other value its bytes while the
// collective writes them. Without overlap (attr overlap = false) the start
// only packs and the wait runs the whole collective itself. Collectives are
// never dropped (dce) nor skipped (the executor), outputs read or not: every
// rank must take part in each.
//
// Attr after = true: the start's last input is the request of the
// collective before it, read for nothing but order. Ranks that run
// different functions (a sharded optimizer update) chain their starts so,
// since every rank must start the same collectives in the same order.
#include <cstring>

#include "ops/op.h"
#include "trainstep/collective.h"

namespace ts {

namespace {

enum class Coll { AllReduce, ReduceScatter, AllGather };

constexpr int64_t kNoRequest = -1;  // one rank: nothing to do
constexpr int64_t kRunInWait = -2;  // overlap off

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all-reduce";
    case Coll::ReduceScatter: return "reduce-scatter";
    case Coll::AllGather: return "all-gather";
  }
  return "?";
}

int data_inputs(const NodeCtx& ctx) {
  const bool after = ctx.attrs().contains("after") && ctx.attr_bool("after");
  return ctx.num_inputs() - (after ? 1 : 0);
}

// attr counts: elements per rank, in rank order; attr rank: this rank.
struct Chunks {
  std::vector<size_t> counts;
  size_t offset = 0, own = 0, total = 0;
};

Chunks chunks_of(const NodeCtx& ctx) {
  const std::vector<int64_t> c = ctx.attr_ints("counts");
  const int64_t rank = ctx.attr_int("rank");
  if (c.size() < 2) ctx.fail("attr 'counts' needs one entry per rank, at least two");
  if (rank < 0 || rank >= int64_t(c.size())) ctx.fail("attr 'rank' is out of range");
  Chunks r;
  for (size_t k = 0; k < c.size(); ++k) {
    if (c[k] < 0) ctx.fail("attr 'counts' holds a negative count");
    if (int64_t(k) < rank) r.offset += size_t(c[k]);
    r.counts.push_back(size_t(c[k]));
    r.total += size_t(c[k]);
  }
  r.own = size_t(c[size_t(rank)]);
  return r;
}

template <Coll C>
std::vector<TensorType> start_infer(const NodeCtx& ctx) {
  const int n_in = data_inputs(ctx);
  if (n_in < (C == Coll::AllGather ? 0 : 1)) ctx.fail("needs at least one tensor");
  if (n_in < ctx.num_inputs()) ctx.expect_dtype(n_in, DType::I64);
  // A rank may own nothing in an all-gather's bucket: attr dtype then says.
  DType t = n_in > 0 ? ctx.input(0).dtype : DType::F32;
  if (n_in == 0) {
    if (!ctx.attrs().contains("dtype") || !ctx.attrs()["dtype"].is_string())
      ctx.fail("without inputs, needs attr 'dtype'");
    t = dtype_from_name(ctx.attrs()["dtype"].get<std::string>());
  }
  if (t != DType::F32 && t != DType::F64) ctx.fail("its tensors must be float32 or float64");
  int64_t n = 0;
  for (int i = 0; i < n_in; ++i) {
    if (ctx.input(i).dtype != t) ctx.fail("a bucket's tensors must share one dtype");
    n += ctx.input(i).numel();
  }
  if (C != Coll::AllReduce) {
    const Chunks c = chunks_of(ctx);
    if (C == Coll::ReduceScatter && c.total != size_t(n))
      ctx.fail("attr 'counts' sums to " + std::to_string(c.total) +
               " elements, the bucket holds " + std::to_string(n));
    if (C == Coll::AllGather && c.own != size_t(n))
      ctx.fail("its inputs hold " + std::to_string(n) + " elements, this rank's chunk " +
               std::to_string(c.own));
    n = int64_t(c.total);
  }
  return {TensorType{t, {n}}, TensorType{DType::I64, {}}};
}

// Starts collective C on `buf` (the whole bucket).
template <Coll C>
Collective::Request begin(Collective& coll, void* buf, size_t count, DType dtype,
                          const Chunks& chunks, const char* what) {
  if (C == Coll::AllReduce) return coll.all_reduce(buf, count, dtype, ReduceOp::Sum, what);
  if (C == Coll::ReduceScatter)
    return coll.reduce_scatter(buf, chunks.counts.data(), dtype, ReduceOp::Sum, what);
  return coll.all_gather(buf, chunks.counts.data(), dtype, what);
}

template <Coll C>
class StartKernel : public Kernel {
 public:
  explicit StartKernel(const KernelCtx& k)
      : what_(std::string(coll_name(C)) + " '" + k.node.node() + "'"), coll_(k.collective),
        overlap_(!k.node.has_attr("overlap") || k.node.attr_bool("overlap")) {
    for (int i = 0; i < data_inputs(k.node); ++i) bytes_.push_back(k.node.input(i).nbytes());
    dtype_ = k.outputs[0].dtype;
    count_ = static_cast<size_t>(k.outputs[0].numel());
    if (C != Coll::AllReduce) {
      chunks_ = chunks_of(k.node);
      if (coll_ && (coll_->size() != int(chunks_.counts.size()) ||
                    coll_->rank() != k.node.attr_int("rank")))
        k.node.fail("was made for rank " + std::to_string(k.node.attr_int("rank")) + " of " +
                    std::to_string(chunks_.counts.size()) + ", and runs as rank " +
                    std::to_string(coll_->rank()) + " of " + std::to_string(coll_->size()));
    }
  }
  void run(const Tensor* in, Tensor* out) override {
    char* dst = static_cast<char*>(out[0].data);
    if (C == Coll::AllGather) dst += chunks_.offset * dtype_size(dtype_);  // this rank's chunk
    for (size_t i = 0; i < bytes_.size(); ++i) {
      std::memcpy(dst, in[i].data, bytes_[i]);
      dst += bytes_[i];
    }
    int64_t req = kNoRequest;
    if (coll_ && coll_->size() > 1)
      req = overlap_ ? begin<C>(*coll_, out[0].data, count_, dtype_, chunks_, what_.c_str())
                     : kRunInWait;
    *out[1].as<int64_t>() = req;
  }

 private:
  std::string what_;
  Collective* coll_;
  bool overlap_;
  std::vector<size_t> bytes_;
  DType dtype_ = DType::F32;
  size_t count_ = 0;
  Chunks chunks_;
};

template <Coll C>
std::unique_ptr<Kernel> start_make(const KernelCtx& k) {
  return std::make_unique<StartKernel<C>>(k);
}

// attrs: shapes, one per output, in the bucket's order (for a
// reduce-scatter, this rank's chunk's); counts and rank as the start's.
template <Coll C>
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
  int64_t want = b.shape[0];
  if (C != Coll::AllReduce) {
    const Chunks c = chunks_of(ctx);
    if (c.total != size_t(b.shape[0])) ctx.fail("attr 'counts' does not sum to the bucket's size");
    if (C == Coll::ReduceScatter) want = int64_t(c.own);
  }
  // A rank may update nothing in a reduce-scatter's bucket: no outputs.
  if ((outs.empty() && C != Coll::ReduceScatter) || n != want)
    ctx.fail("the shapes hold " + std::to_string(n) + " elements, " +
             (C == Coll::ReduceScatter ? "this rank's chunk " : "the bucket ") +
             std::to_string(want));
  return outs;
}

template <class T>
void unpack(const T* src, const Tensor* out, size_t n_out, T scale, bool scaled) {
  for (size_t i = 0; i < n_out; ++i) {
    const int64_t n = out[i].numel();
    if (out[i].data) {
      T* d = out[i].as<T>();
      if (scaled)
        for (int64_t k = 0; k < n; ++k) d[k] = src[k] * scale;
      else
        std::memcpy(d, src, size_t(n) * sizeof(T));
    }
    src += n;
  }
}

template <Coll C>
class WaitKernel : public Kernel {
 public:
  explicit WaitKernel(const KernelCtx& k)
      : what_(std::string(coll_name(C)) + " '" + k.node.node() + "'"), coll_(k.collective),
        dtype_(k.node.input(0).dtype), count_(static_cast<size_t>(k.node.input(0).numel())),
        n_out_(k.outputs.size()) {
    if (C != Coll::AllReduce) chunks_ = chunks_of(k.node);
  }
  void run(const Tensor* in, Tensor* out) override {
    // One process (no collective, or a group of one): the bucket is the sum.
    const bool many = coll_ && coll_->size() > 1;
    const int64_t req = *in[1].as<int64_t>();
    if (many && req >= 0) coll_->wait(req);
    if (many && req == kRunInWait)
      coll_->wait(begin<C>(*coll_, in[0].data, count_, dtype_, chunks_, what_.c_str()));
    // Gradients are averaged; gathered parameters are copied as they are.
    const bool average = C != Coll::AllGather;
    const double ranks = many ? coll_->size() : 1;
    const size_t skip = C == Coll::ReduceScatter ? chunks_.offset : 0;  // this rank's chunk
    if (dtype_ == DType::F64)
      unpack<double>(in[0].as<double>() + skip, out, n_out_, 1.0 / ranks, average);
    else
      unpack<float>(in[0].as<float>() + skip, out, n_out_, static_cast<float>(1.0 / ranks),
                    average);
  }

 private:
  std::string what_;
  Collective* coll_;
  DType dtype_;
  size_t count_, n_out_;
  Chunks chunks_;
};

template <Coll C>
std::unique_ptr<Kernel> wait_make(const KernelCtx& k) {
  return std::make_unique<WaitKernel<C>>(k);
}

template <Coll C>
void add_pair(OpRegistry& r, const char* start_name, const char* start_doc, const char* wait_name,
              const char* wait_doc) {
  // Gradients and parameters cross the ranks as float32 (or float64):
  // autocast keeps both in float32.
  OpDef start{start_name, start_doc, &start_infer<C>, &start_make<C>};
  start.comm = CommRole::Start;
  start.bf16 = Bf16::No;
  r.add(std::move(start));
  OpDef wait{wait_name, wait_doc, &wait_infer<C>, &wait_make<C>};
  wait.comm = CommRole::Wait;
  wait.bf16 = Bf16::No;
  r.add(std::move(wait));
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  add_pair<Coll::AllReduce>(
      r, "trainstep.all_reduce_start",
      "packs a bucket of float gradients and starts summing it over the ranks (made by the "
      "data-parallel pass; outputs the bucket and a request)",
      "trainstep.all_reduce_wait",
      "waits for a bucket's sum and unpacks it averaged over the ranks (attr shapes; made by the "
      "data-parallel pass)");
  add_pair<Coll::ReduceScatter>(
      r, "trainstep.reduce_scatter_start",
      "packs a bucket of float gradients, ordered by the rank that updates them, and starts "
      "summing each rank's chunk onto it (attrs counts, rank; made by the data-parallel pass "
      "with a sharded optimizer)",
      "trainstep.reduce_scatter_wait",
      "waits for this rank's chunk of a bucket's sum and unpacks it averaged over the ranks "
      "(attrs shapes, counts, rank)");
  add_pair<Coll::AllGather>(
      r, "trainstep.all_gather_start",
      "packs this rank's new parameters into its chunk of a bucket and starts sending it to every "
      "rank (attrs counts, rank, dtype; made by the sharded optimizer update)",
      "trainstep.all_gather_wait",
      "waits for every rank's chunk of a bucket and unpacks the parameters (attrs shapes, "
      "counts, rank)");
}

}  // namespace ts

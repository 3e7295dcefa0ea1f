#include "cuda/step.h"

#include <cstdlib>
#include <cstring>

#include "cuda/nonfinite.h"

namespace ts::cuda {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

char* at(const DeviceBuffer& b, size_t off) { return static_cast<char*>(b.get()) + off; }
char* at(const PinnedBuffer& b, size_t off) { return static_cast<char*>(b.get()) + off; }

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

CudaStep::CudaStep(const Function& f, MemoryPlan plan, std::shared_ptr<Handles> h)
    : f_(f), plan_(std::move(plan)), h_(std::move(h)) {
  debug_ = env_on("TRAINSTEP_CUDA_DEBUG");
  check(cudaSetDevice(h_->device), "cudaSetDevice");
  const size_t nv = f.value_names.size();
  values_.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    values_[v].dtype = f.value_types[v].dtype;
    values_[v].shape = f.value_types[v].shape;
  }
  arena_ = device_alloc(plan_.arena_bytes, where() + "'s arena");

  // Inputs that come from the host each step.
  size_t io = 0;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Port& p = f.inputs[i];
    if (p.role == Role::State) continue;
    if (p.role == Role::Grad)
      fail(where() + ": takes gradients as inputs (apply_step), which --device cuda does not run yet");
    host_in_.push_back({int(i), p.value, io, p.type.nbytes()});
    io += align256(p.type.nbytes());
  }
  io_ = device_alloc(io, where() + "'s inputs");
  staging_ = pinned_alloc(io, where() + "'s inputs");

  // One kernel per node; views share their input's memory and run nothing.
  const KernelTable& table = KernelTable::get();
  for (const Node& n : f.nodes) {
    if (n.def->alias_input0) continue;
    Step s;
    s.node = &n;
    s.io = node_io(f, n, plan_);
    if (!s.io.any_live) continue;
    const MakeKernel* make = table.find(def_of(n));
    if (!make)
      fail(where() + ": node '" + n.name + "' (" + n.op + ") has no CUDA kernel yet" +
           (n.source.empty() ? "" : "; it comes from " + n.source) +
           ". Run this artifact with --device cpu");
    NodeCtx ctx = node_ctx(f, n);
    KernelCtx kctx{ctx, s.io.out_types, 1};
    Build b{kctx, h_->dnn, h_->blas, &def_of(n)};
    s.kernel = (*make)(b);
    workspace_bytes_ = std::max(workspace_bytes_, s.kernel->workspace_bytes());
    steps_.push_back(std::move(s));
  }
  workspace_ = device_alloc(workspace_bytes_, where() + "'s workspace");

  // Outputs: new state stays on the device; everything else comes back.
  size_t out_bytes = 0;
  outputs_.resize(f.outputs.size());
  for (size_t j = 0; j < f.outputs.size(); ++j) {
    const Port& p = f.outputs[j];
    if (p.role == Role::State) {
      const int in = f.find_input(Role::State, p.state);
      if (in < 0) fail(where() + ": new state '" + p.state + "' has no state input");
      const int iv = f.inputs[in].value;
      const bool is_float = p.type.dtype == DType::F32 || p.type.dtype == DType::F64;
      state_out_.push_back({int(j), p.value, iv, is_float && p.value != iv});
      staging_dev_bytes_ += align256(p.type.nbytes());
      continue;
    }
    if (p.role == Role::Grad)
      fail(where() + ": gives gradients (grad_step), which --device cuda does not run yet");
    host_out_.push_back({int(j), p.value, out_bytes});
    out_bytes += align256(p.type.nbytes());
  }
  out_ = pinned_alloc(out_bytes, where() + "'s outputs");
  for (const HostOut& o : host_out_) {
    outputs_[o.port].dtype = f.outputs[o.port].type.dtype;
    outputs_[o.port].shape = f.outputs[o.port].type.shape;
    outputs_[o.port].data = at(out_, o.offset);
  }
  staging_dev_ = device_alloc(staging_dev_bytes_, where() + "'s state staging");
  flags_ = device_alloc(sizeof(int) * std::max<size_t>(state_out_.size(), 1), "NaN flags");
  flags_host_ = pinned_alloc(sizeof(int) * std::max<size_t>(state_out_.size(), 1), "NaN flags");
  std::memset(flags_host_.get(), 0, sizeof(int) * std::max<size_t>(state_out_.size(), 1));
  device_bytes_ = plan_.arena_bytes + io + workspace_bytes_ + staging_dev_bytes_;
}

CudaStep::~CudaStep() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void CudaStep::set_profiling(bool on) {
  profiling_ = on;
  if (!on || !events_.empty()) return;
  events_.resize(2 * steps_.size());
  for (cudaEvent_t& e : events_) check(cudaEventCreate(&e), "cudaEventCreate");
  for (const Step& s : steps_) times_.push_back({s.node});
}

std::string CudaStep::where() const { return f_.name + " on " + h_->name; }

void CudaStep::bind_host_input(int i, const void* host) {
  for (HostInput& hi : host_in_)
    if (hi.port == i) {
      hi.host = host;
      return;
    }
  fail(where() + ": input '" + f_.inputs.at(i).name + "' is not a host input");
}

void CudaStep::bind_device_input(int i, void* device) {
  Tensor& t = values_[f_.inputs.at(i).value];
  if (t.data != device) dirty_ = true;
  t.data = device;
}

void CudaStep::resolve() {
  for (size_t v = 0; v < values_.size(); ++v)
    if (plan_.has_slot(int(v))) values_[v].data = at(arena_, plan_.offset[v]);
  for (const HostInput& hi : host_in_) values_[hi.value].data = at(io_, hi.offset);
  for (const Port& p : f_.inputs)
    if (p.role == Role::State && !values_[p.value].data && p.type.nbytes() > 0)
      fail(where() + ": state input '" + p.name + "' is not bound");
  for (size_t v = 0; v < values_.size(); ++v)
    if (plan_.root[v] != static_cast<int>(v)) values_[v].data = values_[plan_.root[v]].data;
  for (Step& s : steps_) s.io.point(*s.node, values_);
}

void CudaStep::enqueue() {
  cudaStream_t st = h_->stream;
  for (const HostInput& hi : host_in_)
    if (hi.bytes)
      check(cudaMemcpyAsync(at(io_, hi.offset), at(staging_, hi.offset), hi.bytes,
                            cudaMemcpyHostToDevice, st),
            where() + ": copy input '" + f_.inputs[hi.port].name + "'");
  const Ctx c{st, h_->blas, h_->dnn, workspace_.get(), workspace_bytes_};
  const bool timed = profiling_ && !events_.empty();  // never under capture (run())
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (timed) check(cudaEventRecord(events_[2 * i], st), "cudaEventRecord");
    s.kernel->run(s.io.in.data(), s.io.out.data(), c);
    if (timed) check(cudaEventRecord(events_[2 * i + 1], st), "cudaEventRecord");
    if (debug_)
      check(cudaStreamSynchronize(st),
            where() + ": node '" + s.node->name + "' (" + s.node->op + ")");
  }
  // New state not written in place goes back into its state buffer. A new
  // value that *is* another state's old buffer (new_b = old_a) is staged
  // first, so no copy reads a buffer already overwritten.
  auto in_state = [&](const void* p) {
    for (const StateOut& so : state_out_) {
      const Tensor& t = values_[so.input_value];
      const char* b = static_cast<const char*>(t.data);
      if (p >= b && p < b + t.nbytes()) return true;
    }
    return false;
  };
  std::vector<const void*> src(state_out_.size());
  size_t staged = 0;
  for (size_t k = 0; k < state_out_.size(); ++k) {
    const StateOut& so = state_out_[k];
    const Tensor& from = values_[so.value];
    const Tensor& to = values_[so.input_value];
    src[k] = from.data;
    if (from.data == to.data || !in_state(from.data) || !to.nbytes()) continue;
    check(cudaMemcpyAsync(at(staging_dev_, staged), from.data, to.nbytes(),
                          cudaMemcpyDeviceToDevice, st),
          where() + ": stage new state");
    src[k] = at(staging_dev_, staged);
    staged += align256(to.nbytes());
  }
  for (size_t k = 0; k < state_out_.size(); ++k) {
    const Tensor& to = values_[state_out_[k].input_value];
    if (src[k] == to.data || !to.nbytes()) continue;
    check(cudaMemcpyAsync(to.data, src[k], to.nbytes(), cudaMemcpyDeviceToDevice, st),
          where() + ": write back new state '" + f_.outputs[state_out_[k].port].state + "'");
  }
  // The NaN/inf check of the new state, then everything the host reads.
  int* flags = static_cast<int*>(flags_.get());
  if (!state_out_.empty())
    check(cudaMemsetAsync(flags, 0, sizeof(int) * state_out_.size(), st), "clear NaN flags");
  for (size_t k = 0; k < state_out_.size(); ++k) {
    if (!state_out_[k].check) continue;
    const Tensor& t = values_[state_out_[k].input_value];
    launch_count_nonfinite({t.data, t.numel(), t.dtype == DType::F64}, flags + k, st);
    check_launch("count_nonfinite");
  }
  for (const HostOut& o : host_out_) {
    const Tensor& t = values_[o.value];
    if (t.nbytes())
      check(cudaMemcpyAsync(at(out_, o.offset), t.data, t.nbytes(), cudaMemcpyDeviceToHost, st),
            where() + ": copy output '" + f_.outputs[o.port].name + "'");
  }
  if (!state_out_.empty())
    check(cudaMemcpyAsync(flags_host_.get(), flags, sizeof(int) * state_out_.size(),
                          cudaMemcpyDeviceToHost, st),
          "copy NaN flags");
}

void CudaStep::capture() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  cudaStream_t st = h_->stream;
  check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), where() + ": begin capture");
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(st, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  check(cudaStreamEndCapture(st, &graph_),
        where() + ": recording the step as a CUDA graph (TRAINSTEP_CUDA_DEBUG=1 runs it without one)");
  check(cudaGraphInstantiate(&exec_, graph_, 0), where() + ": instantiate the CUDA graph");
  check(cudaGraphGetNodes(graph_, nullptr, &graph_nodes_), "count graph nodes");
  dirty_ = false;
}

void CudaStep::run() {
  for (const HostInput& hi : host_in_) {
    if (!hi.bytes) continue;
    if (!hi.host) fail(where() + ": input '" + f_.inputs[hi.port].name + "' is not bound");
    std::memcpy(at(staging_, hi.offset), hi.host, hi.bytes);
  }
  if (const cudaError_t e = cudaSetDevice(h_->device); e != cudaSuccess) check(e, "cudaSetDevice");
  if (debug_ || profiling_) {
    resolve();
    enqueue();
  } else if (dirty_ || !exec_) {
    // This run goes uncaptured, so every kernel's module is loaded (lazily,
    // by CUDA) before the recording; the graph serves the next runs.
    resolve();
    enqueue();
    check(cudaStreamSynchronize(h_->stream),
          where() + ": the step failed on the GPU (TRAINSTEP_CUDA_DEBUG=1 names the node)");
    capture();
    return;
  } else {
    // Messages are built only on failure: this path allocates nothing.
    const cudaError_t e = cudaGraphLaunch(exec_, h_->stream);
    if (e != cudaSuccess) check(e, where() + ": launch the step's graph");
  }
  const cudaError_t e = cudaStreamSynchronize(h_->stream);
  if (e != cudaSuccess)
    check(e, where() + ": the step failed on the GPU (TRAINSTEP_CUDA_DEBUG=1 names the node)");
  if (profiling_)
    for (size_t i = 0; i < times_.size(); ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]), "cudaEventElapsedTime");
      times_[i].seconds += 1e-3 * ms;
    }
}

const Tensor& CudaStep::output(int i) const {
  const Tensor& t = outputs_.at(i);
  if (!t.data && f_.outputs.at(i).type.nbytes() > 0)
    fail(where() + ": output '" + f_.outputs.at(i).name + "' stays on the device");
  return t;
}

int CudaStep::first_nonfinite_state() const {
  const int* flags = static_cast<const int*>(flags_host_.get());
  for (size_t k = 0; k < state_out_.size(); ++k)
    if (state_out_[k].check && flags[k] > 0) return state_out_[k].port;
  return -1;
}

std::string CudaStep::describe() const {
  return std::to_string(steps_.size()) + " kernels per step, launched as " +
         (debug_ ? std::string("separate kernels (TRAINSTEP_CUDA_DEBUG)")
                 : "one CUDA graph of " + std::to_string(graph_nodes_) + " nodes") +
         "; " + bytes_str(device_bytes_) + " of device memory";
}

}  // namespace ts::cuda

// Shared oneDNN plumbing for the kernels (conv, matmul). Kernels build their
// primitives, memory objects and argument lists in make(); run() only swaps
// data handles and calls exec(), which goes through the C API with the
// prebuilt argument array so the C++ wrapper allocates nothing per step.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "trainstep/tensor.h"

namespace ts {

dnnl::engine& cpu_engine();  // one CPU engine for the process
dnnl::stream& cpu_stream();  // per thread; in-order, so execution is synchronous

dnnl::memory::dims to_dims(const Shape& s);

// oneDNN's element type for a float32 or bfloat16 tensor, the dtypes the
// oneDNN kernels take (float64 runs elsewhere).
dnnl::memory::data_type dnnl_type(DType t);

// Whether oneDNN has bfloat16 products on this CPU (AVX512_BF16, AMX, or
// AVX-512's converting forms; oneDNN 2.6 has none below AVX-512, and
// ONEDNN_MAX_CPU_ISA may forbid them). Asked once.
bool dnnl_bf16_available();

// A primitive plus its arguments, bound once. The memory objects are held
// here so their raw handles in `args` stay valid.
struct DnnlStep {
  dnnl::primitive prim;
  std::vector<dnnl_exec_arg_t> args;
  std::vector<dnnl::memory> mems;
  bool is_reorder = false;  // timed apart when profiling (LayoutTimer)
  void bind(int arg, const dnnl::memory& m);
  void exec() const;  // throws ts::Error on failure
};

// A user-mode scratchpad attribute: the kernel owns the scratchpad memory, so
// oneDNN does not grow a library-managed one on the first execution.
dnnl::primitive_attr user_scratchpad_attr();

// Allocates (in make) a memory of md, bound as the step's scratchpad if non-empty.
void bind_scratchpad(DnnlStep& step, const dnnl::memory::desc& md);

// Plain (row-major) memory with no data yet; set_data_handle at run.
dnnl::memory plain_memory(const dnnl::memory::desc& md);

// Owning memory for an internal (blocked) layout, allocated in make().
dnnl::memory owned_memory(const dnnl::memory::desc& md);

// A reorder from src to dst (same logical tensor, different layouts).
DnnlStep make_reorder(const dnnl::memory& src, const dnnl::memory& dst);

// One tensor at a kernel's boundary: `plain` wraps the caller's data; `inner`
// is what the primitive uses — the same object when layouts agree, else an
// owned buffer plus a reorder (plain->inner for inputs, inner->plain for
// outputs). Built in make(); run() calls set() and sync().
struct DnnlPort {
  dnnl::memory plain, inner;
  bool reorder = false;
  DnnlStep step;

  DnnlPort() = default;
  DnnlPort(const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want, bool is_input) {
    plain = plain_memory(plain_md);
    if (want == plain_md) {
      inner = plain;
      return;
    }
    reorder = true;
    inner = owned_memory(want);
    step = is_input ? make_reorder(plain, inner) : make_reorder(inner, plain);
  }
  void set(void* p) { plain.set_data_handle(p); }
  void sync() const {
    if (reorder) step.exec();
  }
};

}  // namespace ts

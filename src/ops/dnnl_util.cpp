#include "ops/dnnl_util.h"

#include <chrono>

#include "ops/op.h"

#include <string>

#include "trainstep/error.h"

namespace ts {

bool dnnl_bf16_available() {
  static const bool ok = [] {
    using dnnl::memory;
    const memory::desc md({2, 2}, memory::data_type::bf16, memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

dnnl::memory::data_type dnnl_type(DType t) {
  if (t == DType::BF16) return dnnl::memory::data_type::bf16;
  if (t == DType::F32) return dnnl::memory::data_type::f32;
  fail(std::string("oneDNN kernels take float32 or bfloat16, not ") + dtype_name(t));
}

void DnnlStep::bind(int arg, const dnnl::memory& m) {
  mems.push_back(m);
  args.push_back({arg, m.get()});
}

void DnnlStep::exec() const {
  const bool timed = is_reorder && LayoutTimer::on();
  auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  dnnl_status_t st = dnnl_primitive_execute(prim.get(), cpu_stream().get(),
                                            static_cast<int>(args.size()), args.data());
  if (timed)
    LayoutTimer::seconds() +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st != dnnl_success) fail("oneDNN primitive execution failed (status " + std::to_string(st) + ")");
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void bind_scratchpad(DnnlStep& step, const dnnl::memory::desc& md) {
  if (md.get_size() == 0) return;
  step.bind(DNNL_ARG_SCRATCHPAD, dnnl::memory(md, cpu_engine()));
}

dnnl::memory plain_memory(const dnnl::memory::desc& md) {
  return dnnl::memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}

dnnl::memory owned_memory(const dnnl::memory::desc& md) { return dnnl::memory(md, cpu_engine()); }

DnnlStep make_reorder(const dnnl::memory& src, const dnnl::memory& dst) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  dnnl::reorder::primitive_desc pd(cpu_engine(), src.get_desc(), cpu_engine(), dst.get_desc(), attr);
  DnnlStep s;
  s.prim = dnnl::reorder(pd);
  s.is_reorder = true;
  s.bind(DNNL_ARG_FROM, src);
  s.bind(DNNL_ARG_TO, dst);
  bind_scratchpad(s, pd.scratchpad_desc());
  return s;
}

}  // namespace ts

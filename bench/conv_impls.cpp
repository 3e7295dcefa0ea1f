// Every convolution implementation oneDNN offers for a shape (the
// primitive descriptor's next_impl() list), forward, backward-data and
// backward-weights, each timed at one thread: whether choosing among them
// by measurement, as matmul does (src/ops/kernel_choice.h), would pay.
//   g++ -O2 -std=c++17 bench/conv_impls.cpp -ldnnl -o /tmp/conv_impls
//   OMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=AVX2 /tmp/conv_impls [N IC OC HW K STRIDE PAD]
// Without arguments: the zoo's 3x3 shapes (MNIST's two convs, ResNet-like
// stages). The reference implementation (ref:any) is left out: it is
// hundreds of times slower and never a candidate.
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;

namespace {

struct Shape {
  int n, ic, oc, hw, k, stride, pad;
};

double best_us(const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) run();
    std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - t0;
    best = std::min(best, d.count() / 3);
  }
  return best;
}

// Times each implementation of `pd` on memories for the arguments `args`,
// in the layouts that implementation asks for (each picks its own).
template <class PD, class P>
void each_impl(const char* what, const Shape& s, PD& pd, engine& eng, stream& st,
               const std::vector<int>& args) {
  do {
    if (!std::strncmp(pd.impl_info_str(), "ref", 3)) continue;
    std::unordered_map<int, memory> mem;
    for (int arg : args) mem.emplace(arg, memory(pd.query_md(query::exec_arg_md, arg), eng));
    P prim(pd);
    const double us = best_us([&] { prim.execute(st, mem); st.wait(); });
    std::printf("n%-3d ic%-4d oc%-4d hw%-3d k%d s%d  %-12s %-16s %9.1f us\n", s.n, s.ic, s.oc,
                s.hw, s.k, s.stride, what, pd.impl_info_str(), us);
  } while (pd.next_impl());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{64, 1, 32, 28, 3, 1, 0},  {64, 32, 64, 26, 3, 1, 0},
                               {32, 16, 16, 32, 3, 1, 1}, {32, 32, 32, 16, 3, 2, 1},
                               {32, 64, 64, 8, 3, 1, 1}};
  if (argc == 8) {
    int v[7];
    for (int i = 0; i < 7; ++i) v[i] = std::atoi(argv[i + 1]);
    shapes = {{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}};
  }
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  for (const Shape& s : shapes) {
    const int oh = (s.hw + 2 * s.pad - s.k) / s.stride + 1;
    const memory::desc src({s.n, s.ic, s.hw, s.hw}, memory::data_type::f32, tag::any);
    const memory::desc wei({s.oc, s.ic, s.k, s.k}, memory::data_type::f32, tag::any);
    const memory::desc dst({s.n, s.oc, oh, oh}, memory::data_type::f32, tag::any);
    const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
    const auto alg = algorithm::convolution_direct;
    // The op descs outlive their primitive descs: next_impl() walks an
    // iterator over the op desc, and a temporary one ends the list early.
    const convolution_forward::desc fwd_d(prop_kind::forward_training, alg, src, wei, dst,
                                          strides, pad, pad);
    const convolution_backward_data::desc data_d(alg, src, wei, dst, strides, pad, pad);
    const convolution_backward_weights::desc wei_d(alg, src, wei, dst, strides, pad, pad);
    convolution_forward::primitive_desc fwd(fwd_d, eng);
    each_impl<decltype(fwd), convolution_forward>(
        "forward", s, fwd, eng, st, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST});
    convolution_backward_data::primitive_desc bwd_data(data_d, eng, fwd);
    each_impl<decltype(bwd_data), convolution_backward_data>(
        "grad_input", s, bwd_data, eng, st,
        {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST});
    convolution_backward_weights::primitive_desc bwd_w(wei_d, eng, fwd);
    each_impl<decltype(bwd_w), convolution_backward_weights>(
        "grad_weight", s, bwd_w, eng, st, {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST});
  }
}

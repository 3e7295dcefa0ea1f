#include "ops/broadcast.h"

#include <algorithm>

namespace ts {

namespace {
int category(DType t) { return t == DType::Bool ? 0 : dtype_is_float(t) ? 2 : 1; }
int int_rank(DType t) { return t == DType::I64 ? 3 : t == DType::I32 ? 2 : 1; }

// Combines the winners of two priority levels as at::result_type does: the
// higher level wins unless the lower one is of a higher category.
bool defined(int t) { return t >= 0; }
int combine(int higher, int lower) {
  if (!defined(higher)) return lower;
  if (!defined(lower)) return higher;
  DType h = static_cast<DType>(higher), l = static_cast<DType>(lower);
  if (dtype_is_float(h)) return higher;
  if (h == DType::Bool || dtype_is_float(l)) return static_cast<int>(promote_types(h, l));
  return higher;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {  // the wider float: bfloat16 < float32 < float64
    auto width = [](DType t) { return t == DType::BF16 ? 0 : t == DType::F32 ? 1 : 2; };
    return width(a) > width(b) ? a : b;
  }
  return int_rank(a) > int_rank(b) ? a : b;
}

DType result_type(const std::vector<TensorType>& ops) {
  int dim = -1, zero = -1, wrapped = -1;
  auto upd = [](int& cur, DType t) {
    cur = defined(cur) ? static_cast<int>(promote_types(static_cast<DType>(cur), t))
                       : static_cast<int>(t);
  };
  for (const auto& t : ops) {
    if (t.wrapped) {
      // A wrapped Python float counts as the default dtype (float32).
      upd(wrapped, dtype_is_float(t.dtype) ? DType::F32 : t.dtype);
    } else if (t.shape.empty()) {
      upd(zero, t.dtype);
    } else {
      upd(dim, t.dtype);
    }
  }
  int r = combine(dim, combine(zero, wrapped));
  return defined(r) ? static_cast<DType>(r) : DType::F32;
}

TensorType scalar_attr_type(const NodeCtx& ctx, const std::string& key) {
  TensorType t;
  t.wrapped = true;
  if (!ctx.has_attr(key)) ctx.fail("missing attribute '" + key + "'");
  const json& v = ctx.attrs().at(key);
  if (v.is_boolean())
    t.dtype = DType::Bool;
  else if (v.is_number_integer())
    t.dtype = DType::I64;
  else if (v.is_number() || v.is_string())
    t.dtype = DType::F64;
  else
    ctx.fail("attribute '" + key + "' must be a number");
  if (v.is_string()) ctx.attr_float(key);  // validates "inf"/"-inf"/"nan"
  return t;
}

DType compute_dtype(DType t) {
  if (t == DType::BF16) return DType::F32;  // rounded once, on the way out
  return (t == DType::I32 || t == DType::U8) ? DType::I64 : t;
}

Shape broadcast_shapes(const NodeCtx& ctx, const std::vector<Shape>& shapes) {
  size_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  Shape out(r, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[r - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string msg = "shapes cannot be broadcast together:";
      for (const auto& x : shapes) msg += " " + shape_str(x);
      ctx.fail(msg);
    }
  }
  return out;
}

int64_t wrap_dim(const NodeCtx& ctx, int64_t d, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  if (d < -r || d >= r)
    ctx.fail("dim " + std::to_string(d) + " is out of range for a tensor of rank " +
             std::to_string(rank));
  return d < 0 ? d + r : d;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

namespace {
template <class S, class D>
void cast_typed(const S* s, D* d, int64_t n) {
  parallel_for(n, n > kParallelMin, [&](int64_t i) { d[i] = convert<D>(s[i]); });
}
}  // namespace

namespace {
// A bfloat16 cast goes through float32 in chunks, so the rest stays one
// dispatch: f(first element, count, a float buffer of kBf16Chunk).
constexpr int64_t kBf16Chunk = 1024;

template <class F>
void for_bf16_chunks(int64_t n, F&& f) {
  parallel_region(n > kParallelMin, [&](int t, int nt) {
    int64_t i0, i1;
    split_range(n, t, nt, i0, i1);
    float tmp[kBf16Chunk];
    for (int64_t i = i0; i < i1; i += kBf16Chunk) f(i, std::min(kBf16Chunk, i1 - i), tmp);
  });
}

void cast_to_bf16(const void* src, DType sd, uint16_t* dst, int64_t n) {
  for_bf16_chunks(n, [&](int64_t i, int64_t m, float* tmp) {
    if (sd == DType::F32) return floats_to_bf16(static_cast<const float*>(src) + i, dst + i, m);
    dispatch_dtype(sd, [&](auto tag) {
      using S = decltype(tag);
      const S* s = static_cast<const S*>(src) + i;
      for (int64_t k = 0; k < m; ++k) tmp[k] = static_cast<float>(s[k]);
    });
    floats_to_bf16(tmp, dst + i, m);
  });
}

void cast_from_bf16(const uint16_t* src, void* dst, DType dd, int64_t n) {
  for_bf16_chunks(n, [&](int64_t i, int64_t m, float* tmp) {
    if (dd == DType::F32) return bf16_to_floats(src + i, static_cast<float*>(dst) + i, m);
    bf16_to_floats(src + i, tmp, m);
    dispatch_dtype(dd, [&](auto tag) {
      using D = decltype(tag);
      D* d = static_cast<D*>(dst) + i;
      for (int64_t k = 0; k < m; ++k) d[k] = convert<D>(tmp[k]);
    });
  });
}
}  // namespace

uint16_t double_to_bf16(double x) {
  // Through float32, as c10::BFloat16 converts a double (so a value within
  // float32's rounding of a tie rounds twice, as it does in torch).
  return float_to_bf16(static_cast<float>(x));
}

void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n) {
  if (sd == dd) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(sd));
    return;
  }
  if (dd == DType::BF16) return cast_to_bf16(src, sd, static_cast<uint16_t*>(dst), n);
  if (sd == DType::BF16) return cast_from_bf16(static_cast<const uint16_t*>(src), dst, dd, n);
  dispatch_dtype(sd, [&](auto s) {
    using S = decltype(s);
    dispatch_dtype(dd, [&](auto d) {
      using D = decltype(d);
      cast_typed(static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
}

double read_as_double(const void* p, DType t) {
  if (t == DType::BF16) return bf16_to_float(*static_cast<const uint16_t*>(p));
  return dispatch_dtype(t, [&](auto x) { return static_cast<double>(*static_cast<const decltype(x)*>(p)); });
}

int64_t read_as_int(const void* p, DType t) {
  if (t == DType::BF16) return convert<int64_t>(bf16_to_float(*static_cast<const uint16_t*>(p)));
  return dispatch_dtype(t, [&](auto x) { return convert<int64_t>(*static_cast<const decltype(x)*>(p)); });
}

void store_scalar(void* dst, DType t, double d, int64_t i) {
  if (t == DType::BF16) {
    *static_cast<uint16_t*>(dst) = double_to_bf16(d);
    return;
  }
  dispatch_dtype(t, [&](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>)
      *static_cast<T*>(dst) = static_cast<T>(d);
    else if constexpr (std::is_same_v<T, bool>)
      *static_cast<T*>(dst) = d != 0.0 || i != 0;
    else
      *static_cast<T*>(dst) = static_cast<T>(i);
  });
}

void fill_bytes(void* dst, const void* elem, size_t esize, int64_t n) {
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, elem, sizeof(T));
    T* d = static_cast<T*>(dst);
    parallel_for(n, n > kParallelMin, [&](int64_t i) { d[i] = v; });
  };
  switch (esize) {
    case 1: fill(uint8_t{}); break;
    case 2: fill(uint16_t{}); break;
    case 4: fill(uint32_t{}); break;
    default: fill(uint64_t{}); break;
  }
}

BcastPlan make_bcast_plan(const NodeCtx& ctx, const Shape& out, const std::vector<Shape>& ins) {
  BcastPlan p;
  p.nops = static_cast<int>(ins.size());
  p.numel = shape_numel(out);
  const int r = static_cast<int>(out.size());
  // Per-operand strides against the output, then drop size-1 dims and merge.
  std::vector<std::vector<int64_t>> st(ins.size(), std::vector<int64_t>(r, 0));
  for (size_t k = 0; k < ins.size(); ++k) {
    const Shape& s = ins[k];
    auto cs = contiguous_strides(s);
    for (size_t i = 0; i < s.size(); ++i)
      st[k][r - s.size() + i] = s[i] == 1 ? 0 : cs[i];
    p.flat[k] = shape_numel(s) == p.numel;
    p.scalar[k] = shape_numel(s) == 1;
  }
  std::vector<int64_t> shp;
  std::vector<std::vector<int64_t>> mst(ins.size());
  for (int d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    bool merge = !shp.empty();
    for (size_t k = 0; k < ins.size() && merge; ++k)
      merge = mst[k].back() == st[k][d] * out[d];
    if (merge) {
      shp.back() *= out[d];
      for (size_t k = 0; k < ins.size(); ++k) mst[k].back() = st[k][d];
    } else {
      shp.push_back(out[d]);
      for (size_t k = 0; k < ins.size(); ++k) mst[k].push_back(st[k][d]);
    }
  }
  if (shp.size() > static_cast<size_t>(kMaxDims))
    ctx.fail("broadcast needs more than " + std::to_string(kMaxDims) + " dims");
  p.rank = static_cast<int>(shp.size());
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = shp[d];
    for (size_t k = 0; k < ins.size(); ++k) p.strides[k][d] = mst[k][d];
  }
  return p;
}

}  // namespace ts

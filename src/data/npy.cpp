// .npy arrays: the header and the element types (npy.h says which).
#include "data/npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "trainstep/error.h"

namespace ts {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .npy reader assumes a little-endian host"
#endif

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

}  // namespace

std::string printable(const std::string& s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

namespace {

// ---- the header: a Python dict literal ----------------------------------

struct HeaderValue {
  enum Kind { Str, Bool, Tuple } kind = Str;
  std::string str;
  bool b = false;
  std::vector<int64_t> ints;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  std::vector<std::pair<std::string, HeaderValue>> parse_dict() {
    std::vector<std::pair<std::string, HeaderValue>> out;
    ws();
    if (!eat('{')) bad("not a Python dict (does not start with '{')");
    for (;;) {
      ws();
      if (eat('}')) break;
      if (p_ >= s_.size()) bad("the dict is not closed");
      if (s_[p_] != '\'' && s_[p_] != '"') bad("expected a quoted key at offset " + std::to_string(p_));
      std::string key = string();
      ws();
      if (!eat(':')) bad("expected ':' after the key '" + printable(key) + "'");
      ws();
      out.emplace_back(key, value(key));
      ws();
      if (eat(',')) continue;
      if (eat('}')) break;
      bad("expected ',' or '}' at offset " + std::to_string(p_));
    }
    for (; p_ < s_.size(); ++p_)
      if (!std::strchr(" \t\r\n", s_[p_]) || s_[p_] == '\0')
        bad("unexpected text after the dict at offset " + std::to_string(p_));
    return out;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(where_ + ": bad .npy header: " + what + " (header: \"" + printable(s_) + "\")");
  }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r' || s_[p_] == '\n')) ++p_;
  }
  bool eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(p_, n, w) != 0) return false;
    p_ += n;
    return true;
  }
  std::string string() {
    const char q = s_[p_++];
    std::string out;
    for (;;) {
      if (p_ >= s_.size()) bad("unterminated string");
      const char c = s_[p_++];
      if (c == q) return out;
      if (c == '\\') bad("escapes in strings are not supported");
      out += c;
    }
  }
  int64_t integer() {
    if (p_ >= s_.size() || s_[p_] < '0' || s_[p_] > '9') {
      if (p_ < s_.size() && s_[p_] == '-') bad("negative dimension in the shape");
      bad("expected a dimension at offset " + std::to_string(p_));
    }
    int64_t v = 0;
    while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
      const int d = s_[p_++] - '0';
      if (v > (kInt64Max - d) / 10) bad("a dimension does not fit in 64 bits");
      v = v * 10 + d;
    }
    if (p_ < s_.size() && (s_[p_] == 'L' || s_[p_] == 'l')) ++p_;  // Python 2's long literals
    return v;
  }
  HeaderValue value(const std::string& key) {
    HeaderValue v;
    if (p_ >= s_.size()) bad("the dict ends after the key '" + printable(key) + "'");
    const char c = s_[p_];
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Str;
      v.str = string();
    } else if (word("True")) {
      v.kind = HeaderValue::Bool;
      v.b = true;
    } else if (word("False")) {
      v.kind = HeaderValue::Bool;
      v.b = false;
    } else if (c == '(') {
      ++p_;
      v.kind = HeaderValue::Tuple;
      for (;;) {
        ws();
        if (eat(')')) break;
        v.ints.push_back(integer());
        if (v.ints.size() > 64) bad("more than 64 dimensions");
        ws();
        if (eat(',')) continue;
        if (eat(')')) break;
        bad("expected ',' or ')' in the tuple at offset " + std::to_string(p_));
      }
    } else if (c == '[' && key == "descr") {
      fail(where_ + ": structured arrays (a list of fields as 'descr') are not supported; save "
           "each field as its own array");
    } else {
      bad("unsupported value for '" + printable(key) + "' at offset " + std::to_string(p_));
    }
    return v;
  }

  const std::string& s_;
  const std::string& where_;
  size_t p_ = 0;
};

// ---- element types -------------------------------------------------------

enum class Src { F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, B1 };

struct SrcType {
  const char* code;  // descr without the byte order
  Src src;
  size_t size;
  DType out;
};

// The mapping documented in npy.h: types with no dtype of their own widen
// to one that holds every value.
constexpr SrcType kSrcTypes[] = {
    {"f2", Src::F16, 2, DType::F32}, {"f4", Src::F32, 4, DType::F32}, {"f8", Src::F64, 8, DType::F64},
    {"i1", Src::I8, 1, DType::I32},  {"i2", Src::I16, 2, DType::I32}, {"i4", Src::I32, 4, DType::I32},
    {"i8", Src::I64, 8, DType::I64}, {"u1", Src::U8, 1, DType::U8},   {"u2", Src::U16, 2, DType::I32},
    {"u4", Src::U32, 4, DType::I64}, {"u8", Src::U64, 8, DType::I64}, {"b1", Src::B1, 1, DType::Bool},
};

template <typename T>
T load(const uint8_t* p, bool swap) {
  T v;
  if (swap) {
    uint8_t b[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) b[i] = p[sizeof(T) - 1 - i];
    std::memcpy(&v, b, sizeof v);
  } else {
    std::memcpy(&v, p, sizeof v);
  }
  return v;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    exp = 113;
    while (!(man & 0x400)) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename S, typename D>
void convert(const uint8_t* in, uint8_t* out, int64_t n, bool swap) {
  for (int64_t i = 0; i < n; ++i) {
    const D d = static_cast<D>(load<S>(in + i * sizeof(S), swap));
    std::memcpy(out + i * sizeof(D), &d, sizeof d);
  }
}

// Converts n elements of type t in file order into out (its dtype's size each).
void convert_elements(const SrcType& t, bool swap, const uint8_t* in, uint8_t* out, int64_t n,
                      const std::string& where) {
  switch (t.src) {
    case Src::F32:
    case Src::F64:
    case Src::I32:
    case Src::I64:
    case Src::U8:
      if (!swap || t.size == 1) {
        if (n) std::memcpy(out, in, static_cast<size_t>(n) * t.size);
        return;
      }
      if (t.size == 4) return convert<uint32_t, uint32_t>(in, out, n, true);
      return convert<uint64_t, uint64_t>(in, out, n, true);
    case Src::F16:
      for (int64_t i = 0; i < n; ++i) {
        const float f = half_to_float(load<uint16_t>(in + 2 * i, swap));
        std::memcpy(out + 4 * i, &f, 4);
      }
      return;
    case Src::I8: return convert<int8_t, int32_t>(in, out, n, false);
    case Src::I16: return convert<int16_t, int32_t>(in, out, n, swap);
    case Src::U16: return convert<uint16_t, int32_t>(in, out, n, swap);
    case Src::U32: return convert<uint32_t, int64_t>(in, out, n, swap);
    case Src::U64:
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = load<uint64_t>(in + 8 * i, swap);
        if (v > uint64_t(kInt64Max))
          fail(where + ": uint64 element " + std::to_string(i) + " is " + std::to_string(v) +
               ", beyond int64 (uint64 arrays load as int64)");
        std::memcpy(out + 8 * i, &v, 8);
      }
      return;
    case Src::B1:
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] != 0;
      return;
  }
}

// Column-major (Fortran) elements of the given shape into row-major order.
std::vector<uint8_t> fortran_to_c(const std::vector<uint8_t>& in, const Shape& shape, size_t esize) {
  std::vector<uint8_t> out(in.size());
  const size_t k = shape.size();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return out;
  std::vector<int64_t> fstride(k), idx(k, 0);
  int64_t s = 1;
  for (size_t j = 0; j < k; ++j) {
    fstride[j] = s;
    s *= shape[j];
  }
  int64_t off = 0;  // the Fortran offset of row-major element r
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(out.data() + r * esize, in.data() + off * esize, esize);
    for (size_t j = k; j-- > 0;) {  // advance the row-major multi-index
      if (++idx[j] < shape[j]) {
        off += fstride[j];
        break;
      }
      off -= (shape[j] - 1) * fstride[j];
      idx[j] = 0;
    }
  }
  return out;
}

std::string shape_text(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

NpyArray parse_npy(const uint8_t* data, size_t size, const std::string& where) {
  static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0) {
    if (size >= 6 && std::memcmp(data, kMagic, 6) != 0)
      fail(where + ": not a .npy file (bad magic; a .npy starts with \\x93NUMPY)");
    fail(where + ": truncated: " + std::to_string(size) + " bytes, shorter than a .npy header");
  }
  const int major = data[6], minor = data[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(where + ": unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
         " (1.0, 2.0 and 3.0 are)");
  size_t hstart, hlen;
  if (major == 1) {
    hstart = 10;
    hlen = size_t(data[8]) | size_t(data[9]) << 8;
  } else {
    hstart = 12;
    if (size < 12) fail(where + ": truncated: the header length is cut off");
    hlen = size_t(data[8]) | size_t(data[9]) << 8 | size_t(data[10]) << 16 | size_t(data[11]) << 24;
  }
  if (hlen > size - hstart)
    fail(where + ": truncated: the header declares " + std::to_string(hlen) + " bytes, the file has " +
         std::to_string(size - hstart) + " after the preamble");
  const std::string text(reinterpret_cast<const char*>(data + hstart), hlen);
  const auto dict = HeaderParser(text, where).parse_dict();

  const HeaderValue *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (const auto& [k, v] : dict) {
    const HeaderValue** slot = k == "descr" ? &descr : k == "fortran_order" ? &fortran : k == "shape" ? &shape : nullptr;
    if (!slot) fail(where + ": bad .npy header: unknown key '" + printable(k) + "'");
    if (*slot) fail(where + ": bad .npy header: '" + k + "' given twice");
    *slot = &v;
  }
  if (!descr || !fortran || !shape)
    fail(where + ": bad .npy header: missing '" +
         std::string(!descr ? "descr" : !fortran ? "fortran_order" : "shape") + "' (header: \"" + printable(text) + "\")");
  if (descr->kind != HeaderValue::Str) fail(where + ": bad .npy header: 'descr' is not a string");
  if (fortran->kind != HeaderValue::Bool) fail(where + ": bad .npy header: 'fortran_order' is not True or False");
  if (shape->kind != HeaderValue::Tuple) fail(where + ": bad .npy header: 'shape' is not a tuple");

  // descr: byte order, kind, size ('<f4').
  const std::string& d = descr->str;
  char order = '=';
  std::string code = d;
  if (!d.empty() && std::strchr("<>=|", d[0])) order = d[0], code = d.substr(1);
  if (code == "?") code = "b1";
  const SrcType* t = nullptr;
  for (const auto& c : kSrcTypes)
    if (code == c.code) t = &c;
  if (!t)
    fail(where + ": unsupported element type '" + printable(d) +
         "' (supported: float16/32/64, int8/16/32/64, uint8/16/32/64, bool)");
  if (order == '|' && t->size > 1)
    fail(where + ": element type '" + printable(d) + "' has no byte order ('|') but " +
         std::to_string(t->size) + "-byte elements");
  const bool swap = order == '>' && t->size > 1;

  // The shape's element count, guarded against overflow (a shape with a
  // zero dimension must still have a product of the others that fits).
  int64_t numel = 1, nonzero = 1;
  bool zero = false;
  for (int64_t dim : shape->ints) {
    if (dim == 0) {
      zero = true;
      continue;
    }
    if (nonzero > kInt64Max / dim)
      fail(where + ": shape " + shape_text(shape->ints) + " has more than 2^63 elements");
    nonzero *= dim;
  }
  numel = zero ? 0 : nonzero;
  if (nonzero > kInt64Max / 8)
    fail(where + ": shape " + shape_text(shape->ints) + " is too large");
  const size_t want = static_cast<size_t>(numel) * t->size;
  const size_t have = size - hstart - hlen;
  if (have < want)
    fail(where + ": truncated: shape " + shape_text(shape->ints) + " of '" + printable(d) + "' needs " +
         std::to_string(want) + " bytes of data, the file has " + std::to_string(have));
  if (have > want)
    fail(where + ": " + std::to_string(have - want) + " trailing bytes after the " + std::to_string(want) +
         " bytes of data of shape " + shape_text(shape->ints));

  NpyArray a;
  a.dtype = t->out;
  a.shape = shape->ints;
  const size_t osize = dtype_size(a.dtype);
  a.data.resize(static_cast<size_t>(numel) * osize);
  convert_elements(*t, swap, data + hstart + hlen, a.data.data(), numel, where);
  if (fortran->b && a.shape.size() > 1) a.data = fortran_to_c(a.data, a.shape, osize);
  return a;
}

}  // namespace ts

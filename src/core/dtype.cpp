#include "trainstep/dtype.h"

#include "trainstep/error.h"

namespace ts {

namespace {
struct DTypeInfo {
  DType t;
  size_t size;
  const char* name;
  const char* st_name;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F32, 4, "float32", "F32"}, {DType::F64, 8, "float64", "F64"},
    {DType::I64, 8, "int64", "I64"},   {DType::I32, 4, "int32", "I32"},
    {DType::U8, 1, "uint8", "U8"},     {DType::Bool, 1, "bool", "BOOL"},
    {DType::BF16, 2, "bfloat16", "BF16"},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_safetensors_name(DType t) { return info(t).st_name; }

DType dtype_from_name(const std::string& s) {
  for (const auto& i : kInfo)
    if (s == i.name || s == i.st_name) return i.t;
  fail("unknown dtype '" + s + "'");
}

bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::BF16; }
bool dtype_is_int(DType t) { return t == DType::I64 || t == DType::I32 || t == DType::U8; }

}  // namespace ts

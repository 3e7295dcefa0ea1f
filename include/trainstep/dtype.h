// Element types the runtime understands, with the names used in artifacts
// ("float32", …) and in safetensors headers ("F32", …).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ts {

// BF16 is bfloat16 (torch.bfloat16): float32's sign and exponent with 7
// mantissa bits; kernels compute it in float32 and round once (bfloat16.h).
enum class DType : uint8_t { F32, F64, I64, I32, U8, Bool, BF16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);              // "float32", "int64", "bool", …
const char* dtype_safetensors_name(DType t);  // "F32", "I64", "BOOL", …
DType dtype_from_name(const std::string& s);  // accepts either spelling; throws ts::Error
bool dtype_is_float(DType t);  // float32, float64, bfloat16
bool dtype_is_int(DType t);  // integral, bool excluded

}  // namespace ts

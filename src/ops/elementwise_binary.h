// Binary elementwise ops (elementwise_binary.cpp): the names passes emit.
#pragma once

namespace ts::opname {
inline constexpr const char* add = "aten.add.Tensor";
}  // namespace ts::opname

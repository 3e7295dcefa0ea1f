// Matrix products: the ops' names, spelled once. Their registration (src/ops)
// and every backend's kernel table use these.
#pragma once

namespace ts::opname {

inline constexpr const char* mm = "aten.mm.default";
inline constexpr const char* bmm = "aten.bmm.default";
inline constexpr const char* addmm = "aten.addmm.default";
// addmm reading mat1 / mat2 transposed in place (attrs trans_a, trans_b).
inline constexpr const char* addmm_t = "trainstep.addmm";

}  // namespace ts::opname

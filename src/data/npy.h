// numpy's .npy arrays and .npz archives of them (np.save, np.savez,
// np.savez_compressed), as a dataset: one field per array.
//
// .npy: magic "\x93NUMPY", version 1.0, 2.0 or 3.0, a little-endian header
// length (u16 in 1.0, u32 after), then a Python dict literal
// {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces
// and a newline, then the elements.
//
// Element types (descr) and the dtype each becomes:
//   f4 -> float32     f8 -> float64     f2 -> float32 (widened, exact)
//   i8 -> int64       i4 -> int32       i2, i1 -> int32 (widened)
//   u1 -> uint8       u2 -> int32, u4 -> int64 (widened: no unsigned dtype)
//   u8 -> int64 (rejected where a value does not fit)
//   b1 -> bool (bytes normalized to 0 / 1)
// Byte order '<' (little), '>' (big: byte-swapped on load), '=' (native,
// little on the machines trainstep runs on) or, for one-byte types, '|'.
// Fortran-order arrays are transposed to row-major on load. Structured,
// complex, string and object arrays are rejected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainstep/dataset.h"
#include "trainstep/npz.h"  // NpyArray, write_npz: public

namespace ts {


// Parses the bytes of a whole .npy file. Every malformed input is a
// ts::Error whose message starts with `where` (a file, or a file and its
// member).
NpyArray parse_npy(const uint8_t* data, size_t size, const std::string& where);

// Text from an untrusted file (a header, a member name) for a message: at
// most `max` bytes, unprintable ones escaped as \xNN.
std::string printable(const std::string& s, size_t max = 120);

// The arrays of a .npz (a zip of NAME.npy members, stored or deflated), in
// archive order, each named without its ".npy". The bytes variant reads an
// archive from memory; `where` names it in messages.
std::vector<std::pair<std::string, NpyArray>> read_npz(const std::string& path);
std::vector<std::pair<std::string, NpyArray>> read_npz_bytes(const uint8_t* data, size_t size,
                                                              const std::string& where);


// npz.cpp: archives and the dataset.
//
// A dataset of the arrays in a .npz, or of the one array of a .npy (its
// field named after the file's stem: x.npy -> "x"). Each array's dim 0 is
// the sample index; a field's shape is the array's without it. Train:
// samples [0, cut), Test: [cut, n), cut = n - n / 10; All: every sample.
std::unique_ptr<Dataset> open_npz(const std::string& path, Split split);

}  // namespace ts

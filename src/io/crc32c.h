// CRC-32C (Castagnoli), the checksum of TFRecord framing (train/event_file.h).
//
// Hand-written because Debian 12 ships no C/C++ CRC32C library (apt has only
// python3-crc32c; zlib's crc32 is the other polynomial). Table-driven, one
// byte at a time: event records are a few hundred bytes, written ~10 times
// an epoch, so speed does not matter here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ts {

// CRC-32C of a byte range; pass a previous result as `crc` to continue it.
// crc32c("123456789") == 0xE3069283, the algorithm's published check value.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

// TFRecord's masked form: rotated and offset, so a CRC stored next to the
// data it covers is not itself a valid CRC of a record.
uint32_t mask_crc32c(uint32_t crc);

}  // namespace ts

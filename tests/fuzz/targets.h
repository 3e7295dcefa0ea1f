// The fuzz targets: one function per parser of untrusted input. Each must
// return normally for every input (a ts::Error is a normal outcome: the
// input was rejected with a message); anything else (another exception, a
// crash, a sanitizer report, a broken round trip, which aborts) is a
// finding. libFuzzer drives them (fuzz_main.cpp, `make fuzz`); the gtest
// FuzzCorpus replays the seed corpus and every past finding through them
// (tests/fuzz/corpus/TARGET, tests/fuzz/regressions/TARGET).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ts_fuzz {

using Target = void (*)(const uint8_t* data, size_t size);

// Program JSON -> parse_program (structure, ops, type inference), then the
// compiler passes and the memory plan of every verified function (cleanup,
// fusion and in-place each on or off, picked by a hash of the input); a
// function whose values are all small then gets its kernels built
// (Executor) and runs one step on deterministic inputs (sometimes with
// out-of-range integers).
void program(const uint8_t* data, size_t size);
// IR text -> parse_function; a parsed function must print and re-parse to
// the same text; then the compiler passes, the memory plan and, as for
// `program`, one step of a small function.
void ir_text(const uint8_t* data, size_t size);
// safetensors bytes -> parse_safetensors (header, offsets, data bounds,
// checksums); a parsed file must serialize and re-parse to the same tensors,
// and one flipped bit anywhere in the re-serialized file must be caught.
void safetensors(const uint8_t* data, size_t size);
// A checkpoint file -> Session::load_checkpoint on a tiny artifact, then the
// trainer's resume metadata; a rejected checkpoint must leave the session's
// state unchanged.
void checkpoint(const uint8_t* data, size_t size);
// An IDX file (plain or gzip) -> read_idx.
void idx(const uint8_t* data, size_t size);
// A .npz archive -> read_npz_bytes (libzip, then each member's .npy
// header and data); an input that starts with .npy's magic -> parse_npy.
void npz(const uint8_t* data, size_t size);
// A shard folder's index.json -> parse_shard_index; the same bytes as a
// shard file -> parse_safetensors_layout, then each tensor's checksum over
// the bytes the layout gives it (what the shard reader maps and checks).
void shards(const uint8_t* data, size_t size);
// A JPEG or PNG file -> decode_image (libjpeg-turbo, libspng), at most 1M
// pixels; a decoded image then goes through the eval and a training
// transform (resize and crop arithmetic on odd sizes).
void image(const uint8_t* data, size_t size);

struct NamedTarget {
  const char* name;
  Target fn;
};
const std::vector<NamedTarget>& all_targets();

}  // namespace ts_fuzz

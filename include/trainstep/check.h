// Check a trainstep file without running it, public: an artifact (.tstep)
// or a checkpoint, its container, its checksums, and its program or
// checkpoint metadata; a checkpoint also against the artifact it is meant
// for. It is what `trainstep check` runs; a program of its own calls
// check_file() before trusting a file, e.g. one copied from elsewhere.
//
// A file that fails a check is an error, not a result: check_file() throws
// ts::Error naming the file and what is wrong (a checksum mismatch, a
// truncated container, a program that does not verify, a checkpoint that
// does not fit the artifact, a file of neither kind). The report says what
// was checked, and whether the file carried checksums at all: one written
// before checksums passes with checksummed false (its contents unproven).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ts {

enum class FileKind { Artifact, Checkpoint };

struct CheckReport {
  FileKind kind = FileKind::Artifact;
  std::string model;           // the model's name (the artifact's program's, the checkpoint's)
  size_t tensors = 0;          // tensors in the file
  size_t tensor_bytes = 0;     // their data, headers and metadata left out
  bool checksummed = false;    // false: written before checksums (nothing to compare)
  std::string checksum_algorithm;  // when checksummed: "xxh3_64"
  size_t functions = 0;        // an artifact's: functions in its program
  int64_t step = 0;            // a checkpoint's: the session step it was saved at
  // A checkpoint's epoch (trainstep/train.h resume_position); none for one
  // saved outside train, which carries no run position.
  std::optional<int64_t> epoch;
};

// Reads and checks the file at `path`. With `artifact` (a checkpoint only),
// also opens that artifact and loads the checkpoint into it (names, dtypes,
// shapes), as Session::load_checkpoint would; for an artifact it is ignored.
CheckReport check_file(const std::string& path, const std::string& artifact = "");

// The one-line notice a command shows for a file without checksums, naming
// `path` and why it matters.
std::string unchecked_notice(const std::string& path);

// A byte count for people: "512 bytes", "1.50 KiB", "2.00 MiB", ...
std::string bytes_str(size_t n);

}  // namespace ts

// Character-level language modelling on a text file. Tokens are bytes (a
// fixed vocabulary of 256, so no vocabulary travels with the artifact and
// any file works, UTF-8 or not). A sample is a window of T+1 bytes: the
// model input (field "x") is its first T bytes, the target ("y") the last
// T (each byte's successor), both int64. Windows start every T bytes, so each byte is
// predicted once per epoch.
//
// Split: the last 10 % of the bytes (len / 10, rounded down) are the test
// split, the rest the train split; windows never cross the cut.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trainstep/dataset.h"

namespace ts {

struct TextDataset : Dataset {
  std::string name;            // for messages: the file or corpus
  std::vector<uint8_t> bytes;  // this split's bytes
  int64_t T = 0;               // window length (model sequence length)

  int64_t size() const override;
  std::string describe() const override;
  std::vector<Field> fields() const override;  // x and y int64[T]
  void read(int64_t i, const ReadContext& c, void* const* out) const override;
};

// Bytes [0, cut) for train, [cut, len) for test, cut = len - len / 10.
TextDataset make_text_split(std::string name, const std::vector<uint8_t>& all, int64_t T, bool train);

// The whole file.
std::vector<uint8_t> read_text_file(const std::string& path);

// Debian's fortune cookies (package `fortunes`): the plain fortune files in
// `dir` (regular files, not *.dat or links), in name order, concatenated.
std::vector<uint8_t> read_fortunes(const std::string& dir);

}  // namespace ts

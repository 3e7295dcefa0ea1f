// One exception type for every user-facing failure. Messages name what and
// where (file, node, op, tensor); the CLI prints them as one line.
#pragma once
#include <stdexcept>
#include <string>

namespace ts {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error(msg); }

}  // namespace ts

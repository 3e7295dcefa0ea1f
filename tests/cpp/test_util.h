// Small helpers shared by the C++ tests.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>

#include "trainstep/error.h"

namespace ts_test {

// The ts::Error message f throws, or "<no error>".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A fresh directory under gtest's temp dir.
inline std::string make_temp_dir(const std::string& prefix = "ts_test_") {
  std::string tmpl = testing::TempDir() + prefix + "XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

}  // namespace ts_test

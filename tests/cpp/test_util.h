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

// Sets an environment variable for one test and restores it after.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace ts_test

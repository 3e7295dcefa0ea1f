// Replays every fuzz target's seed corpus and past findings (each finding's
// input is kept under tests/fuzz/regressions/TARGET/) through the target, so
// a fixed crash stays fixed. Under `make test-asan` the sanitizers watch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../fuzz/targets.h"

namespace fs = std::filesystem;

namespace {

int replay(const std::string& folder, ts_fuzz::Target fn) {
  int n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    SCOPED_TRACE(it->path().string());
    fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  return n;
}

}  // namespace

TEST(FuzzCorpus, SeedsAndPastFindingsRunCleanly) {
  for (const auto& t : ts_fuzz::all_targets()) {
    const std::string dir = std::string(TRAINSTEP_FUZZ_DIR) + "/";
    EXPECT_GT(replay(dir + "corpus/" + t.name, t.fn), 0) << "no seeds for " << t.name;
    replay(dir + "regressions/" + t.name, t.fn);
  }
}

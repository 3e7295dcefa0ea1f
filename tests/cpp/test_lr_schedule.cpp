// LrSchedule: spec parsing errors and a few hand-checked values. Exact parity
// with torch over 1,000 steps is tests/python/test_lr_schedules.py.
#include <gtest/gtest.h>

#include "train/lr_schedule.h"
#include "trainstep/error.h"

namespace {

std::string parse_error(const std::string& spec) {
  try {
    ts::LrSchedule::parse(spec);
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "";
}

TEST(LrSchedule, BadSpecsNameTheSpecAndTheForms) {
  for (const char* spec : {"bogus", "step:0:0.5", "step:3", "exp:x", "cosine:10:1:2",
                           "multistep:5,2:0.1", "linear:0:1:5", "onecycle:0.1",
                           "seq:linear:0.1:1:5|exp:0.9", "seq:exp:0.9|seq:exp:0.9:3:4"}) {
    std::string msg = parse_error(spec);
    EXPECT_NE(msg.find("'" + std::string(spec) + "'"), std::string::npos) << spec << ": " << msg;
    EXPECT_NE(msg.find("expected constant | step:STEP_SIZE:GAMMA"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(LrSchedule, ReasonIsSpecific) {
  EXPECT_NE(parse_error("step:a:0.1").find("STEP_SIZE 'a' is not an integer"), std::string::npos);
  EXPECT_NE(parse_error("seq:exp:0.9|exp:0.8:3,4").find("one milestone fewer"), std::string::npos);
  EXPECT_NE(parse_error("nope:1").find("unknown schedule 'nope'"), std::string::npos);
}

TEST(LrSchedule, ValuesAndCursorAgree) {
  auto s = ts::LrSchedule::parse("step:2:0.5");
  EXPECT_EQ(s.at(1.0, 0), 1.0);
  EXPECT_EQ(s.at(1.0, 1), 1.0);
  EXPECT_EQ(s.at(1.0, 2), 0.5);
  EXPECT_EQ(s.at_epoch(1.0, 5), 0.25);
  auto c = ts::LrSchedule::parse("seq:linear:0.5:1:4|cosine:10:0.01:4");
  auto seq = c.sequence(0.2, 30);
  ts::LrSchedule::Cursor cur(c, 0.2);
  for (int64_t t = 0; t < 30; ++t, cur.step()) EXPECT_EQ(seq[t], cur.lr()) << t;
  EXPECT_EQ(seq[0], 0.1);
  EXPECT_EQ(seq[4], 0.2);  // cosine takes over at its closed form (= base)
  EXPECT_EQ(ts::LrSchedule::parse("").spec(), "constant");
}

TEST(LrSchedule, OneCyclePastTotalStepsFails) {
  auto s = ts::LrSchedule::parse("onecycle:0.1:10");
  EXPECT_NO_THROW(s.at(0.0, 10));
  EXPECT_THROW(s.at(0.0, 11), ts::Error);
}

}  // namespace

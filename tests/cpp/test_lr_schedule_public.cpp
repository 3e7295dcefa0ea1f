// trainstep/lr_schedule.h: the public wrapper gives LrSchedule's values and
// errors unchanged (the CLI's `lr-schedule` prints what it returns).
#include <gtest/gtest.h>

#include "train/lr_schedule.h"
#include "trainstep/error.h"
#include "trainstep/lr_schedule.h"

TEST(LrSchedulePublic, SequenceIsTheInternalOne) {
  for (const char* spec : {"constant", "step:3:0.5", "cosine:10:0.01", "seq:linear:0.1:1:5|exp:0.9:5",
                           "onecycle:1:20"}) {
    EXPECT_EQ(ts::lr_sequence(spec, 0.1, 20), ts::LrSchedule::parse(spec).sequence(0.1, 20)) << spec;
  }
  EXPECT_TRUE(ts::lr_sequence("constant", 0.1, 0).empty());
}

TEST(LrSchedulePublic, BadSpecThrowsTheSameError) {
  std::string internal, checked, sequenced;
  try { ts::LrSchedule::parse("step:3"); } catch (const ts::Error& e) { internal = e.what(); }
  try { ts::check_lr_schedule("step:3"); } catch (const ts::Error& e) { checked = e.what(); }
  try { ts::lr_sequence("step:3", 0.1, 3); } catch (const ts::Error& e) { sequenced = e.what(); }
  EXPECT_FALSE(internal.empty());
  EXPECT_EQ(checked, internal);
  EXPECT_EQ(sequenced, internal);
  EXPECT_NO_THROW(ts::check_lr_schedule("cosine:10"));
}

TEST(LrSchedulePublic, SteppingOneCyclePastItsEndThrows) {
  EXPECT_THROW(ts::lr_sequence("onecycle:1:5", 0.1, 10), ts::Error);
}

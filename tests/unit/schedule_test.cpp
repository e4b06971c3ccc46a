#include "opscope/schedule.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "opscope/error.h"
#include "support/test_support.h"

namespace opscope {
namespace schedule_test {

using A = ProfilerAction;

TEST(Schedule, CyclesWaitWarmupActive) {
  testing::WarningCapture warnings;
  Schedule s = schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 1});
  EXPECT_EQ(s(0), A::kNone);
  EXPECT_EQ(s(1), A::kWarmup);
  EXPECT_EQ(s(2), A::kRecord);
  EXPECT_EQ(s(3), A::kRecordAndSave);
  EXPECT_EQ(s(4), A::kNone);
  EXPECT_EQ(s(100), A::kNone);
  EXPECT_TRUE(warnings.messages().empty());
}

TEST(Schedule, RepeatZeroCyclesForever) {
  Schedule s = schedule({.wait = 0, .warmup = 1, .active = 1});
  for (int step = 0; step < 20; step += 2) {
    EXPECT_EQ(s(step), A::kWarmup);
    EXPECT_EQ(s(step + 1), A::kRecordAndSave);
  }
}

// ../shared/reference/pytorch-1.13/schedule_actions.txt, line by line.
TEST(Schedule, MatchesPyTorchReference) {
  std::ifstream in(std::string(OPSCOPE_REFERENCE_DIR) + "/schedule_actions.txt");
  if (!in) GTEST_SKIP() << "reference file not found under " << OPSCOPE_REFERENCE_DIR;
  Schedule s = schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 2, .skip_first = 1});
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::int64_t step;
    std::string name;
    fields >> step >> name;
    EXPECT_EQ(action_name(s(step)), name) << "step " << step;
    ++lines;
  }
  EXPECT_EQ(lines, 14);
}

TEST(Schedule, WarmupZeroWarns) {
  testing::WarningCapture warnings;
  schedule({.wait = 1, .warmup = 0, .active = 1});
  EXPECT_TRUE(warnings.contains("Profiler won't be using warmup, this can skew profiler results"));
}

TEST(Schedule, InvalidArgumentsNameTheValue) {
  const auto message = [](ScheduleOptions o) { return testing::error_of([&] { schedule(o); }); };
  EXPECT_NE(message({.wait = -1, .warmup = 1, .active = 1}).find("wait=-1"), std::string::npos);
  EXPECT_NE(message({.wait = 0, .warmup = -2, .active = 1}).find("warmup=-2"), std::string::npos);
  EXPECT_NE(message({.wait = 0, .warmup = 1, .active = 0}).find("active=0, must be >= 1"),
            std::string::npos);
  EXPECT_NE(message({.wait = 0, .warmup = 1, .active = 1, .repeat = -1}).find("repeat=-1"),
            std::string::npos);
  EXPECT_NE(message({.wait = 0, .warmup = 1, .active = 1, .skip_first = -3}).find("skip_first=-3"),
            std::string::npos);
  EXPECT_THROW(schedule({.wait = 0, .warmup = 1, .active = 1})(-1), Error);
}

TEST(Schedule, DefaultRecordsEveryStep) {
  Schedule s = default_schedule();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s(i), A::kRecord);
}

}  // namespace schedule_test
}  // namespace opscope

// The transition table of DESIGN.md ("Schedule"), entry by entry.
#include "session/step_driver.h"

#include <gtest/gtest.h>

namespace opscope::session {
namespace step_driver_test {

using A = ProfilerAction;
using S = StepAction;

struct Case {
  A prev;
  std::optional<A> current;
  std::vector<S> actions;
  bool warns;
};

TEST(StepDriver, TransitionTable) {
  const std::vector<Case> cases = {
      {A::kNone, A::kNone, {}, false},
      {A::kNone, A::kWarmup, {S::kPrepare}, false},
      {A::kNone, A::kRecord, {S::kPrepare, S::kStart}, false},
      {A::kNone, A::kRecordAndSave, {S::kPrepare, S::kStart}, false},
      {A::kWarmup, A::kNone, {S::kStart, S::kStop}, true},
      {A::kWarmup, A::kWarmup, {}, false},
      {A::kWarmup, A::kRecord, {S::kStart}, false},
      {A::kWarmup, A::kRecordAndSave, {S::kStart}, false},
      {A::kRecord, A::kNone, {S::kStop}, true},
      {A::kRecord, A::kWarmup, {S::kStop}, true},
      {A::kRecord, A::kRecord, {}, false},
      {A::kRecord, A::kRecordAndSave, {}, false},
      {A::kRecordAndSave, A::kNone, {S::kStop, S::kTraceReady}, false},
      {A::kRecordAndSave, A::kWarmup, {S::kStop, S::kTraceReady, S::kPrepare}, false},
      {A::kRecordAndSave, A::kRecord, {S::kStop, S::kTraceReady, S::kPrepare, S::kStart}, false},
      {A::kRecordAndSave, A::kRecordAndSave,
       {S::kStop, S::kTraceReady, S::kPrepare, S::kStart}, false},
      {A::kNone, std::nullopt, {}, false},
      {A::kWarmup, std::nullopt, {S::kStart, S::kStop}, false},
      {A::kRecord, std::nullopt, {S::kStop, S::kTraceReady}, false},
      {A::kRecordAndSave, std::nullopt, {S::kStop, S::kTraceReady}, false},
  };
  for (const Case& c : cases) {
    const Transition t = transition(c.prev, c.current);
    const std::string label = std::string(action_name(c.prev)) + " -> " +
                              (c.current ? std::string(action_name(*c.current)) : "exit");
    EXPECT_EQ(t.actions, c.actions) << label;
    EXPECT_EQ(!t.warning.empty(), c.warns) << label;
  }
}

TEST(StepDriver, WarningsNameBothActions) {
  EXPECT_EQ(transition(A::kWarmup, A::kNone).warning, "Incorrect schedule: WARMUP followed by NONE");
  EXPECT_EQ(transition(A::kRecord, A::kNone).warning, "Incorrect schedule: RECORD followed by NONE");
  EXPECT_EQ(transition(A::kRecord, A::kWarmup).warning,
            "Incorrect schedule: RECORD followed by WARMUP");
}

}  // namespace step_driver_test
}  // namespace opscope::session

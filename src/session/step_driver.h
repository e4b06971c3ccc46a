// The schedule's state machine: which actions a change of ProfilerAction triggers.
//
// Kept apart from the Profiler so that the transition table — the part of torch.profiler
// that users depend on most — can be tested on its own, action by action.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "opscope/schedule.h"

namespace opscope::session {

// What a transition does, in order.
enum class StepAction : std::uint8_t {
  kPrepare,     // get backends ready (warmup)
  kStart,       // begin recording
  kStop,        // end recording; the window's result becomes available
  kTraceReady,  // hand the window to on_trace_ready
};

struct Transition {
  std::vector<StepAction> actions;
  std::string warning;  // "Incorrect schedule: ..." when the schedule is malformed
};

// The actions for prev → current; `current` empty means the profiler is exiting (stop()).
// Follows torch.profiler.profile's action map exactly (DESIGN.md, "Schedule").
Transition transition(ProfilerAction prev, std::optional<ProfilerAction> current);

}  // namespace opscope::session

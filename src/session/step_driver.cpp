#include "session/step_driver.h"

namespace opscope::session {

Transition transition(ProfilerAction prev, std::optional<ProfilerAction> current) {
  using A = ProfilerAction;
  using S = StepAction;
  const auto incorrect = [&](std::vector<S> actions) {
    return Transition{std::move(actions),
                      "Incorrect schedule: " + std::string(action_name(prev)) + " followed by " +
                          std::string(action_name(*current))};
  };
  if (!current) {  // exit
    switch (prev) {
      case A::kNone: return {};
      case A::kWarmup: return {{S::kStart, S::kStop}, {}};
      case A::kRecord:
      case A::kRecordAndSave: return {{S::kStop, S::kTraceReady}, {}};
    }
  }
  const A cur = *current;
  switch (prev) {
    case A::kNone:
      if (cur == A::kWarmup) return {{S::kPrepare}, {}};
      if (cur == A::kRecord || cur == A::kRecordAndSave) return {{S::kPrepare, S::kStart}, {}};
      return {};
    case A::kWarmup:
      if (cur == A::kNone) return incorrect({S::kStart, S::kStop});
      if (cur == A::kRecord || cur == A::kRecordAndSave) return {{S::kStart}, {}};
      return {};
    case A::kRecord:
      if (cur == A::kNone || cur == A::kWarmup) return incorrect({S::kStop});
      return {};
    case A::kRecordAndSave:
      if (cur == A::kNone) return {{S::kStop, S::kTraceReady}, {}};
      if (cur == A::kWarmup) return {{S::kStop, S::kTraceReady, S::kPrepare}, {}};
      return {{S::kStop, S::kTraceReady, S::kPrepare, S::kStart}, {}};
  }
  return {};
}

}  // namespace opscope::session

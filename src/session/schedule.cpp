#include "opscope/schedule.h"

#include <string>

#include "opscope/error.h"

namespace opscope {

std::string_view action_name(ProfilerAction action) noexcept {
  switch (action) {
    case ProfilerAction::kNone: return "NONE";
    case ProfilerAction::kWarmup: return "WARMUP";
    case ProfilerAction::kRecord: return "RECORD";
    case ProfilerAction::kRecordAndSave: return "RECORD_AND_SAVE";
  }
  return "UNKNOWN";
}

Schedule schedule(ScheduleOptions o) {
  const auto check = [](const char* name, std::int64_t value, std::int64_t min) {
    if (value < min) {
      throw Error("Invalid profiler schedule arguments: " + std::string(name) + "=" +
                  std::to_string(value) + ", must be >= " + std::to_string(min) +
                  " (wait, warmup, repeat, skip_first >= 0; active > 0)");
    }
  };
  check("wait", o.wait, 0);
  check("warmup", o.warmup, 0);
  check("active", o.active, 1);
  check("repeat", o.repeat, 0);
  check("skip_first", o.skip_first, 0);
  if (o.warmup == 0) {
    warn("Profiler won't be using warmup, this can skew profiler results");
  }
  return [o](std::int64_t step) -> ProfilerAction {
    if (step < 0) {
      throw Error("schedule: step must be >= 0, got " + std::to_string(step));
    }
    if (step < o.skip_first) return ProfilerAction::kNone;
    step -= o.skip_first;
    const std::int64_t cycle = o.wait + o.warmup + o.active;
    if (o.repeat > 0 && step / cycle >= o.repeat) return ProfilerAction::kNone;
    const std::int64_t pos = step % cycle;
    if (pos < o.wait) return ProfilerAction::kNone;
    if (pos < o.wait + o.warmup) return ProfilerAction::kWarmup;
    return pos < cycle - 1 ? ProfilerAction::kRecord : ProfilerAction::kRecordAndSave;
  };
}

Schedule default_schedule() {
  return [](std::int64_t) { return ProfilerAction::kRecord; };
}

}  // namespace opscope

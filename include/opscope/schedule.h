// opscope/schedule.h: which steps of a training loop a Profiler records.
//
//   auto s = opscope::schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 1});
//   s(0) == ProfilerAction::kNone; s(1) == kWarmup; s(2) == kRecord; s(3) == kRecordAndSave
//
// Semantics are PyTorch's torch.profiler.schedule: skip `skip_first` steps, then cycles of
// `wait` idle steps, `warmup` steps, `active` recorded steps, the last of which saves;
// after `repeat` cycles (when repeat > 0) nothing more is recorded.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace opscope {

// What the profiler does at a step. Values reach files and sockets: never reuse one.
enum class ProfilerAction : std::uint8_t {
  kNone = 0,
  kWarmup = 1,
  kRecord = 2,
  kRecordAndSave = 3,
};

// "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE" (PyTorch's names).
std::string_view action_name(ProfilerAction action) noexcept;

// Maps a step number (>= 0) to an action.
using Schedule = std::function<ProfilerAction(std::int64_t step)>;

struct ScheduleOptions {
  std::int64_t wait = 0;
  std::int64_t warmup = 0;
  std::int64_t active = 1;
  std::int64_t repeat = 0;      // 0: cycle forever
  std::int64_t skip_first = 0;
};

// Builds a schedule. Throws opscope::Error naming the argument when wait, warmup, repeat or
// skip_first is negative or active is not positive; warns when warmup is 0 (the first recorded
// step then includes start-up costs). The returned callable throws opscope::Error for a
// negative step.
Schedule schedule(ScheduleOptions options);

// The default schedule: record every step.
Schedule default_schedule();

}  // namespace opscope

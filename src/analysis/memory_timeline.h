// The memory timeline: what a window's allocation reports did to one device's memory, by
// category, over time. The model is PyTorch's (torch/profiler/_memory_profiler.py,
// MemoryProfile.timeline and MemoryProfileTimeline), so the files written from it
// (src/export/memory_timeline.cpp) read like PyTorch's:
//
//   std::vector<TimelineEntry> t = memory_timeline(result, Device{DeviceType::kCPU, -1});
//   CoalescedTimeline c = coalesce_timeline(t);   // [times_us, sizes by category]
//
// From the reports of the window (EventKind::kMemory events), in time order:
//   allocation                                      -> CREATE at its time
//   free of an address allocated in the window      -> DESTROY with that allocation's bytes
//                                                      and category
//   free of an address not allocated in the window  -> PREEXISTING at t = -1 (the free's size
//                                                      and category) and DESTROY at its time
//   version report (report_memory_version)          -> INCREMENT_VERSION with the category of
//                                                      the live allocation at that address,
//                                                      else the report's
// An allocation at an address that is still live (its free was never reported, e.g. made
// while no session recorded) first DESTROYs the old allocation, so sizes stay balanced.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "opscope/memory.h"
#include "opscope/result.h"

namespace opscope::analysis {

// PyTorch's Action (enum.auto() values, written as indices by the raw export).
enum class TimelineAction : std::int8_t {
  kPreexisting = 1,
  kCreate = 2,
  kIncrementVersion = 3,
  kDestroy = 4,
};
// "PREEXISTING", "CREATE", "INCREMENT_VERSION", "DESTROY".
std::string_view timeline_action_name(TimelineAction action) noexcept;

struct TimelineEntry {
  std::int64_t t_ns = 0;  // ns since the Unix epoch; -1 for kPreexisting
  TimelineAction action = TimelineAction::kCreate;
  std::int64_t bytes = 0;  // never negative: the action says which way it goes
  MemoryCategory category = MemoryCategory::kUnknown;

  friend bool operator==(const TimelineEntry&, const TimelineEntry&) = default;
};

// True when a report made for `event` counts for the timeline of `requested`. CPU is one
// device whatever the index; for CUDA an index of -1 ("cuda") means device 0, as PyTorch's
// current device does by default.
bool device_matches(Device requested, Device event) noexcept;

// The timeline of `device` in `result`, ordered as PyTorch orders it: by time, then by action
// (PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY); stable otherwise.
std::vector<TimelineEntry> memory_timeline(const ProfilerResult& result, Device device);

// Per-timestamp sizes: index 0 is always 0 (PyTorch's leading column), index i + 1 holds the
// bytes of MemoryCategory i.
using CategorySizes = std::array<std::int64_t, kNumMemoryCategories + 1>;

struct CoalescedTimeline {
  // One per distinct microsecond, ascending; when there is PREEXISTING memory, a first one
  // for it that repeats the earliest time (PyTorch's layout: [t, t, ...]).
  std::vector<std::int64_t> times_us;
  std::vector<CategorySizes> sizes;  // sizes after everything at times_us[i]
};

// PyTorch's _coalesce_timeline: times in whole microseconds (t_ns / 1000, where PyTorch's
// int(t / 1000) in floating point can be one off for wall-clock nanoseconds), entries at one
// microsecond merged, PREEXISTING's -1 replaced by the earliest time.
CoalescedTimeline coalesce_timeline(std::span<const TimelineEntry> timeline);

}  // namespace opscope::analysis

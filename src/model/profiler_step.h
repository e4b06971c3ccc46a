// Which events are profiler steps, by name: the reader leaves out every CPU range but these when
// asked to (TraceReadOptions::cpu_ranges), and the analyses group and drop steps by them.
#pragma once

#include <string_view>

namespace opscope::internal {

// HTA's ProfilerStepGroupingPattern: ^ProfilerStep#(\d+). Inline: every event's name is asked.
inline bool is_profiler_step(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  // The first letter first: every event's name is asked, and few start with a 'P'.
  if (name.size() <= kPrefix.size() || name[0] != 'P' ||
      name.compare(0, kPrefix.size(), kPrefix) != 0) {
    return false;
  }
  return name[kPrefix.size()] >= '0' && name[kPrefix.size()] <= '9';
}

}  // namespace opscope::internal

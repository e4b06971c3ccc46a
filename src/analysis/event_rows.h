// Single events as table rows, for torch's EventList.table() of events() (the Python package).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analysis/symbolizer.h"
#include "opscope/key_averages.h"

namespace opscope::analysis {

// One row per listed event (count 1), in the given order: name, times, memory (`memory` is the
// window's event_memory()), GPU time (`cuda`: its event_cuda()), FLOPs, input shapes and stack
// when the window recorded them. Throws opscope::Error for an index outside the result.
std::vector<FunctionEventAvg> event_rows(const ProfilerResult& result,
                                         std::span<const std::int32_t> events,
                                         const EventMemory& memory, const EventCuda& cuda,
                                         Symbolizer& symbolizer);

}  // namespace opscope::analysis

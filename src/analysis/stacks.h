// Call stacks of events as text, for tables, traces and flame graphs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/symbolizer.h"
#include "opscope/result.h"

namespace opscope::analysis {

// The frames of `event`'s stack as text (Symbolizer::text), innermost first, at most
// `max_frames` of them (0: all). opscope's own recording frames (RecordFunction's slow paths)
// are left out, so the innermost frame is the function that holds the range; so are the
// outermost frames no symbol names (a thread's start-up code). Empty when the event has no
// stack.
std::vector<std::string> stack_text(const ProfilerResult& result, const Event& event,
                                    Symbolizer& symbolizer, std::size_t max_frames = 0);

}  // namespace opscope::analysis

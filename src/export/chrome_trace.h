// chrome_trace.h: the Chrome trace exporter behind opscope/export.h, for callers that pick
// their own sink (benchmarks, the daemon streaming to a socket buffer).
#pragma once

#include <string_view>

#include "export/sink.h"
#include "opscope/result.h"

namespace opscope::internal {

// Writes the Kineto-style Chrome trace of `result` to `sink` and commits it. Throws what the
// sink throws; the sink is left uncommitted then.
void write_chrome_trace(const ProfilerResult& result, std::string_view trace_name, Sink& sink);

}  // namespace opscope::internal

// The flight recorder's process-wide state as its triggers see it (the crash handler, and
// the on-demand client for a dump written through the directory it opened; the environment
// opt-in, above this layer, uses the public header).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "opscope/flight_recorder.h"
#include "opscope/result.h"

namespace opscope::flight {

// Whether a flight recorder records, and its options.
bool running() noexcept;
std::optional<FlightRecorderOptions> options();

// Writes the trace of a dump (what export_trace(result, path) does for the other triggers).
using DumpWriter = std::function<void(const ProfilerResult&)>;
// dump_flight_recorder(path, trigger), written by `write`: the on-demand client creates the
// file in the directory it opened when the request came (0600, following no link). `path`
// names the dump in errors and in the returned FlightDump. Throws as dump_flight_recorder does.
FlightDump dump_with(const std::string& path, std::string_view trigger, const DumpWriter& write);

// The crash dump (flight_crash.cpp): opens the file it will write under `dir` now, and installs
// the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and std::terminate, chaining to
// the ones they replace. Throws opscope::Error when the file cannot be made.
void arm_crash_dump(const std::string& dir, double keep_seconds);
// Restores the handlers replaced (unless another replaced them since) and removes the file
// if nothing was written to it.
void disarm_crash_dump() noexcept;

}  // namespace opscope::flight

// The flight recorder's process-wide state as its triggers see it (the crash handler, the
// on-demand client and the environment opt-in, above this layer, use the public header).
#pragma once

#include <optional>
#include <string>

#include "opscope/flight_recorder.h"

namespace opscope::flight {

// Whether a flight recorder records, and its options.
bool running() noexcept;
std::optional<FlightRecorderOptions> options();

// The crash dump (flight_crash.cpp): opens the file it will write under `dir` now, and installs
// the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and std::terminate, chaining to
// the ones they replace. Throws opscope::Error when the file cannot be made.
void arm_crash_dump(const std::string& dir, double keep_seconds);
// Restores the handlers replaced (unless another replaced them since) and removes the file
// if nothing was written to it.
void disarm_crash_dump() noexcept;

}  // namespace opscope::flight

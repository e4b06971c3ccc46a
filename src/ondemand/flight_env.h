// The flight recorder's opt-in by environment: OPSCOPE_FLIGHT_RECORDER=seconds[,MiB] starts a
// process-wide opscope::FlightRecorder when libopscope is loaded (client.cpp's static
// initializer calls start_flight_recorder_from_env(), before the on-demand client starts, so
// that the client's SIGUSR2 and OPSCOPE_FLIGHT_DUMP requests find it).
//
//   OPSCOPE_FLIGHT_RECORDER   seconds[,MiB]: keep the last `seconds` (a number above 0) in a
//                             ring of `MiB` (an integer from 1 to 1048576; default 64)
//   OPSCOPE_FLIGHT_DIR        where dumps no one names a path for go (SIGUSR2, a slow step,
//                             the crash file); default: the current directory at start-up,
//                             made absolute then
//   OPSCOPE_FLIGHT_ON_CRASH   true/false/1/0: dump the raw ring on a crash (default: true)
//
// A value that is not one of these is a warning naming the variable, the value and what is
// allowed, and no recorder starts: a job must not run believing it records when it does not.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "opscope/flight_recorder.h"

namespace opscope::ondemand {

struct FlightEnv {
  // What to start; nullopt when the environment asks for nothing or a value is malformed.
  std::optional<FlightRecorderOptions> options;
  std::vector<std::string> warnings;  // one per malformed value, each naming the variable
};

// Reads the variables above (only OPSCOPE_FLIGHT_RECORDER decides whether anything starts).
FlightEnv flight_options_from_env();

// Starts the recorder the environment asks for, and never stops it: it lives until the process
// ends (threads may record while static destructors run, so it is never destroyed). Warns, and
// starts nothing, when a value is malformed or the recorder cannot start (one already records,
// the dump directory cannot take the crash file). Never throws.
void start_flight_recorder_from_env() noexcept;

}  // namespace opscope::ondemand

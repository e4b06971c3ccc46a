// opscope/flight_recorder.h: always-on recording of the last seconds of ranges, dumped when
// something goes wrong.
//
//   opscope::FlightRecorder recorder({.keep_seconds = 30, .max_bytes = 64 << 20});
//   for (;;) {
//     train_step();
//     recorder.step();  // a step k times slower than the recent median dumps (slow_step_factor)
//   }
//   ...
//   recorder.dump("last_30s.json");  // any thread, while recording goes on
//
// While a FlightRecorder lives, every thread's ranges are recorded as a Profiler window
// records them (the same cost: two counter reads and a 16-byte append), into a ring of
// `max_bytes` that reuses its oldest chunk when full, so memory never grows past the bound
// however long the program runs or however many threads come and go. A dump writes the ranges
// that ended in the last `keep_seconds`, and the ranges still open, as a trace in any format
// of export_trace() (chosen by the path's suffix), with metadata saying what was kept, what
// was overwritten and what was dropped.
//
// One flight recorder per process. A Profiler window (or an on-demand capture, or the legacy
// profiler) pauses it while it records: the window's ranges are the window's, and the flight
// recorder's dump names the paused span in its metadata (`flightRecorder.pausedNs`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "opscope/lenses.h"

namespace opscope {

struct FlightRecorderOptions {
  double keep_seconds = 60;               // a dump holds what ended in the last keep_seconds
  std::uint64_t max_bytes = 64ull << 20;  // the ring's memory, at least 256 KiB
  LensSet lenses;                         // what ranges record beside their times
  // The slow-step trigger: a step() that took longer than slow_step_factor times the median of
  // the last slow_step_window steps dumps into dump_dir (0: off). At most one such dump per
  // slow_step_min_interval_seconds.
  double slow_step_factor = 0;
  int slow_step_window = 20;
  double slow_step_min_interval_seconds = 60;
  // Where dumps go that no caller names a path for (slow steps, SIGUSR2, a crash).
  std::string dump_dir = ".";
  // Dump the raw ring when the process crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
  // std::terminate): see write_crash_dump in the README's "flight recorder" section.
  bool dump_on_crash = false;
};

// What a dump wrote.
struct FlightDump {
  std::string path;
  std::uint64_t events = 0;       // events in the trace (open ranges included)
  std::uint64_t open_ranges = 0;  // ranges still open at the dump
};

class FlightRecorder {
 public:
  // Starts recording. Throws opscope::Error when a flight recorder records already in this
  // process, or an option is out of range (the message names it and what is allowed).
  explicit FlightRecorder(const FlightRecorderOptions& options = {});
  // Stops recording and frees the ring (its mapping stays reserved, see the README).
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Writes what the ring holds to `path`, while recording goes on. Throws opscope::Error when
  // another dump is being written (one at a time: the error names its path) or the file cannot
  // be written (nothing is left behind).
  FlightDump dump(const std::string& path) const;
  // Marks the end of a step, for the slow-step trigger. Cheap when the trigger is off.
  void step();

  const FlightRecorderOptions& options() const { return options_; }

 private:
  FlightRecorderOptions options_;
};

// The process's flight recorder, for triggers that do not hold it (SIGUSR2, on-demand, the
// environment): whether one records, and a dump of it with `trigger` named in the metadata.
// dump_flight_recorder throws opscope::Error when none records.
bool flight_recorder_running() noexcept;
FlightDump dump_flight_recorder(const std::string& path, std::string_view trigger);
// A path in the recorder's dump_dir for a dump of `trigger` ("sigusr2", "slow_step", ...):
// <dump_dir>/opscope_flight_<pid>_<trigger>_<n>.json.
std::string flight_dump_path(std::string_view trigger);

// Turns the raw file a crash left (<dump_dir>/opscope_flight_<pid>_crash.raw) into a trace at
// `out_path` (any format of export_trace(), by suffix), with the crashed process's names,
// threads and lenses; native stack frames stay addresses. What `opscope flight decode` runs.
// Throws opscope::Error naming the file and the byte where it is not a whole dump.
FlightDump decode_flight_dump(const std::string& raw_path, const std::string& out_path);

}  // namespace opscope

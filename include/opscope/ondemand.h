// opscope/ondemand.h: on-demand tracing, the traced process's side (dynolog compatible).
//
// A process that opts in registers with an on-demand daemon (dynolog, or `opscope daemon`)
// and polls it; when someone asks the daemon for a trace, the process records one window
// with an opscope::Profiler and writes it as a Chrome trace, without restarting.
//
//   // Either set KINETO_USE_DAEMON=1 (or OPSCOPE_USE_DAEMON=1) in the environment, or:
//   opscope::ondemand::enable();
//   for (;;) {
//     train_step();
//     opscope::ondemand::step();  // counts steps for iteration-based requests
//   }
//
// The client is one background thread ("opscope-ondmand") that sends a datagram to the daemon
// every poll interval and otherwise sleeps; application threads never wait for it. A daemon
// that is absent costs one failed send per poll and one warning. Messages (a trace written,
// a request refused and why) go to the warning handler (opscope/error.h), prefixed
// "on-demand:".
//
// Requests (README, "On-demand tracing", lists the config keys):
// - duration-based: recording starts at PROFILE_START_TIME (wall clock, for a synchronized
//   start across processes) or at once, and stops ACTIVITIES_DURATION_MSECS later; both on
//   the background thread.
// - iteration-based: recording starts at the first step() that begins step
//   PROFILE_START_ITERATION or later (rounded up to PROFILE_START_ITERATION_ROUNDUP) and stops
//   ACTIVITIES_ITERATIONS steps later. The start and the stop happen inside step(), on the
//   thread that calls it (a Profiler start, and a stop that builds the window's result); the
//   file is written by the background thread.
// The trace goes to `<ACTIVITIES_LOG_FILE stem>_<pid>.json`, which must lie under the allowed
// directory (/tmp, or OPSCOPE_ONDEMAND_TRACE_DIR). One capture at a time: a request that
// arrives while one is pending or recording is dropped, and so is one that arrives while the
// application records with its own Profiler (one recording window per process).
// A request with OPSCOPE_FLIGHT_DUMP=true (`opscope trace --dump`) records nothing: the
// process's flight recorder is dumped to the request's path at once, on the client thread,
// under the same path rules; without a flight recorder the request is refused.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "opscope/internal/requires_cxx20.h"

namespace opscope::ondemand {

struct ClientOptions {
  // The daemon's IPC endpoint name (dynolog's is "dynolog").
  std::string daemon_endpoint = "dynolog";
  // Where the endpoints are socket files; empty: KINETO_IPC_SOCKET_DIR, else the abstract
  // namespace (dynolog's default).
  std::string socket_dir;
  // How often the daemon is polled (libkineto: 1 s). At least 1 ms.
  std::chrono::milliseconds poll_interval{1000};
  // The job id sent with each poll (dynolog matches requests by it; 0: no job).
  std::int64_t job_id = 0;
  // > 0: SIGUSR2 starts a duration capture of this many ms, written to
  // `<trace dir>/opscope_sigusr2_<pid>.json` (each signal overwrites it). 0: SIGUSR2 untouched.
  std::int64_t sigusr2_duration_ms = 0;
  // true: SIGUSR2 dumps the process's flight recorder (opscope/flight_recorder.h) instead, to
  // flight_dump_path("sigusr2") in the recorder's dump_dir, with "SIGUSR2" as the dump's
  // trigger; a new file each time. Exclusive with sigusr2_duration_ms > 0.
  bool sigusr2_flight_dump = false;
  // The directory traces must lie under; empty: OPSCOPE_ONDEMAND_TRACE_DIR, else /tmp.
  std::string trace_dir;
};

// The options the environment asks for: OPSCOPE_DAEMON_ENDPOINT (default "dynolog"),
// KINETO_IPC_SOCKET_DIR, OPSCOPE_DAEMON_POLL_MS, SLURM_JOB_ID, OPSCOPE_SIGUSR2_DURATION_MS,
// OPSCOPE_SIGUSR2 ("flight": sigusr2_flight_dump, which then wins over
// OPSCOPE_SIGUSR2_DURATION_MS, with a warning), OPSCOPE_ONDEMAND_TRACE_DIR. A value that is
// not a number (or for OPSCOPE_SIGUSR2 not "flight") is ignored with a warning.
ClientOptions client_options_from_env();

// Starts the client. Throws opscope::Error when it is already enabled, when the options are
// invalid, or when its IPC endpoint cannot be bound. Any thread.
void enable(const ClientOptions& options = client_options_from_env());
// Stops the client and joins its thread. A capture that is recording is stopped and written;
// one still pending is dropped. Does nothing when not enabled. Any thread.
void disable();
bool is_enabled();

// Marks the end of one step (an iteration of the application's loop); Profiler::step() calls
// it too, so call one of the two. Cost: one relaxed atomic increment and one load while no
// iteration-based capture is armed; no lock, no allocation. When one is armed, the step that
// starts or ends it starts or stops a Profiler on the calling thread. Never throws.
void step() noexcept;
// The number of step() calls so far in this process.
std::int64_t step_count() noexcept;

// What the client has done, for tests and diagnostics.
struct ClientStatus {
  bool enabled = false;
  bool registered = false;         // the daemon answered the "ctxt" registration
  std::uint64_t polls = 0;         // "req" datagrams sent
  std::uint64_t configs = 0;       // non-empty configs received
  std::uint64_t traces = 0;        // trace files written
  bool capture_armed = false;      // a capture is pending or recording
  bool capture_recording = false;  // ... and its Profiler is started
  std::string endpoint;            // the client's own IPC endpoint name
  std::string last_trace;          // the path of the last trace file written
};
ClientStatus client_status();

}  // namespace opscope::ondemand

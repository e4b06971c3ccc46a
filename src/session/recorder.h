// The recording engine under a Profiler: one window at a time, process-wide.
//
// A Recorder is claimed by one owner (a started Profiler) at a time. It coordinates the
// window's activity backends, which it gets from the backend registry (backend/registry.h) for
// what the window asks (WindowOptions::request) and never names: prepare_window() makes and
// prepares them (the schedule's WARMUP), start_window() starts them, and stop_window() stops
// them, calibrates the clock once, has each add what it recorded to one builder, and returns
// the window's immutable ProfilerResult.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/activity_backend.h"
#include "backend/registry.h"
#include "opscope/result.h"

namespace opscope::session {

struct WindowOptions {
  // What the window records (activities, lenses, the collector epoch, ranges timed on a
  // device): the registry makes the backends from it.
  backend::WindowRequest request;
  std::vector<std::string> not_recorded;  // asked for but not recorded here (SessionStats)
  bool trace_call_stacks = true;  // ExperimentalConfig::verbose, kept in the result
};

class Recorder {
 public:
  // Claims the process-wide recorder for `owner`, described by `what` ("an opscope::Profiler",
  // a Profiler's ProfilerConfig::name, "the legacy profiler") in the error another claimant
  // gets; `what` must stay valid while the claim is held. Throws opscope::Error when another
  // owner holds it.
  static void claim(const void* owner, const char* what);
  // Releases the claim if `owner` holds it.
  static void release(const void* owner) noexcept;

  // Makes the backends of a window of `options` and prepares them (loading a library, say), so
  // that start_window() only starts them; backends prepared before and never started are
  // dropped. Throws what a backend's prepare() throws, and then nothing stays prepared.
  void prepare_window(const WindowOptions& options);
  // Opens a window: with the backends prepare_window() prepared (for these same `options`),
  // or else with backends made and prepared now. The calling thread is a member of
  // thread-limited windows.
  void start_window(const WindowOptions& options);
  bool recording() const { return open_; }
  // Closes the window and builds its result with the given metadata (key, JSON text).
  std::shared_ptr<const ProfilerResult> stop_window(
      std::vector<std::pair<std::string, std::string>> metadata);

 private:
  WindowOptions options_;
  bool open_ = false;
  bool prepared_ = false;  // backends_ are prepared for a window not yet open
  std::uint64_t start_ticks_ = 0;
  std::vector<std::unique_ptr<backend::ActivityBackend>> backends_;  // the prepared or open window's
};

}  // namespace opscope::session

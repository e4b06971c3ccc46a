// The recording engine under a Profiler: one window at a time, process-wide.
//
// A Recorder is claimed by one owner (a started Profiler) at a time; it opens a collector
// epoch at start_window() and, at stop_window(), drains every thread and builds the window's
// immutable ProfilerResult (ticks converted to wall-clock ns, names resolved, async ranges and
// backward links attached).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collect/collector.h"
#include "opscope/result.h"

namespace opscope::session {

struct WindowOptions {
  collect::EpochOptions epoch;
  bool record_cpu = true;  // false: the window records no CPU ranges (a GPU-only session)
  std::vector<std::string> not_recorded;  // asked for but not recorded here (SessionStats)
  LensSet lenses;  // what ranges and allocation reports record besides their times
  bool trace_call_stacks = true;  // ExperimentalConfig::verbose, kept in the result
};

class Recorder {
 public:
  // Claims the process-wide recorder for `owner`, described by `what` (a string literal: "an
  // opscope::Profiler", "the legacy profiler") in the error another claimant gets. Throws
  // opscope::Error when another owner holds it.
  static void claim(const void* owner, const char* what);
  // Releases the claim if `owner` holds it.
  static void release(const void* owner) noexcept;

  // Opens a window. The calling thread is a member of thread-limited windows.
  void start_window(const WindowOptions& options);
  bool recording() const { return open_; }
  // Closes the window and builds its result with the given metadata (key, JSON text).
  std::shared_ptr<const ProfilerResult> stop_window(
      std::vector<std::pair<std::string, std::string>> metadata);

 private:
  WindowOptions options_;
  bool open_ = false;
  std::uint32_t epoch_ = 0;  // 0 while closed or when the window records no CPU ranges
  std::uint64_t start_ticks_ = 0;
  std::uint32_t previous_membership_ = 0;
};

}  // namespace opscope::session

// The recording engine under a Profiler: one window at a time, process-wide.
//
// A Recorder is claimed by one owner (a started Profiler) at a time. It coordinates the
// window's activity backends (src/backend/): start_window() prepares and starts one for each
// kind of activity asked for (CPU ranges: backend::CpuBackend), and stop_window() stops them,
// calibrates the clock once, has each add what it recorded to one builder, and returns the
// window's immutable ProfilerResult.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/activity_backend.h"
#include "backend/cuda_events.h"
#include "collect/collector.h"
#include "opscope/result.h"

namespace opscope::session {

struct WindowOptions {
  collect::EpochOptions epoch;
  bool record_cpu = true;  // false: the window records no CPU ranges (a GPU-only session)
  // The CUPTI library that records the window's CUDA activity; empty: none is recorded.
  std::string cupti_path;
  // Times ranges with CUDA events (backend::CudaEventBackend) on the threads for which this
  // returns true, called at each range's start; empty: no range is timed so.
  std::function<bool()> cuda_event_threads;
  // The driver entry points that timing calls; nullptr: the CUDA driver's (loaded then). Tests
  // give their own.
  const backend::CudaEventApi* cuda_event_api = nullptr;
  std::vector<std::string> not_recorded;  // asked for but not recorded here (SessionStats)
  LensSet lenses;                 // what ranges and allocation reports record besides their times
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
  std::uint64_t start_ticks_ = 0;
  std::vector<std::unique_ptr<backend::ActivityBackend>> backends_;  // the open window's
};

}  // namespace opscope::session

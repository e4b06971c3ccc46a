// The activity backends: what records a window's events, behind one interface.
//
// A recording window (session::Recorder) runs one backend per kind of activity it was asked
// for, as the backend registry (registry.h) makes them: the CPU ranges of the collector
// (CpuBackend), CUDA activity through CUPTI (CuptiBackend), ranges timed with CUDA events
// (CudaEventBackend). The recorder only coordinates them: it prepares every backend before
// the window opens (at the schedule's WARMUP step when there is one), starts every one when it
// opens, stops every one when it closes, then has each add what it recorded to the window's
// one result.
#pragma once

#include <string_view>

#include "clock/clock.h"
#include "opscope/result.h"

namespace opscope::backend {

class ActivityBackend {
 public:
  virtual ~ActivityBackend() = default;

  // For error messages and stats: "cpu", "cuda".
  virtual std::string_view name() const = 0;
  // What can be done before the window opens (allocating, loading a library), so that start()
  // is cheap. May throw opscope::Error; nothing is recording yet.
  virtual void prepare() {}
  // Starts recording; called on the thread that opens the window.
  virtual void start() = 0;
  // Stops recording: nothing recorded later reaches the result. Called on the thread that
  // closes the window, every started backend before any collects.
  virtual void stop() = 0;
  // Adds what was recorded between start() and stop() to the window's result: threads,
  // events, details and the counts of what was lost (builder.stats()). Times are converted
  // with `conv`, the one calibration of the window, so every backend's events share a clock.
  virtual void collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) = 0;
};

}  // namespace opscope::backend

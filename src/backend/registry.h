// The activity backends this build has, one row each, and what a recording window asks of them.
//
// A backend is a file src/backend/<name>_backend.cpp that defines
// `const BackendEntry& <name>_backend_entry()`: its row. CMake lists every such file that is
// built (src/CMakeLists.txt writes backends.inc) and registry.cpp makes the table from that
// list, so adding a backend edits no hub: not the recorder, not the façades, not this file.
//
// The session layer describes a window as a WindowRequest and asks the registry for its
// backends; the façades ask it what can be recorded here and why not:
//
//   backend::WindowRequest request;
//   request.activities = {ActivityType::kCPU, ActivityType::kCUDA};
//   for (auto& b : backend::make_backends(request)) ...       // prepare, start, stop, collect
//   backend::activity_unavailable_reason(ActivityType::kCUDA);  // "" or why not
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/activity_backend.h"
#include "collect/collector.h"
#include "opscope/lenses.h"
#include "opscope/types.h"

namespace opscope::backend {

// What a recording window asks of the backends.
struct WindowRequest {
  // The activities to record; a backend whose activity is not here is not made.
  std::vector<ActivityType> activities = {ActivityType::kCPU};
  // The CPU backend's collector epoch (buffer limit, which threads); its buffer limit also
  // bounds what a GPU backend may buffer.
  collect::EpochOptions epoch;
  LensSet lenses;  // what ranges and allocation reports record besides their times
  // Ranges timed on a device (the legacy profiler's kCUDA, torch's use_cuda fallback): the
  // threads whose ranges are timed, asked on the range's thread at each range's start; empty:
  // no range is. The rows with times_ranges do it, each on its own device, whether or not
  // `activities` asks for that device's activity.
  std::function<bool()> timed_range_threads;
};

// One backend's row.
struct BackendEntry {
  // The backend's name, as ActivityBackend::name() says it: "cpu", "cuda", "cuda_events".
  std::string_view name;
  // What it records: the activity itself when WindowRequest::activities asks for it, or, with
  // times_ranges, the ranges WindowRequest::timed_range_threads selects, timed on this
  // activity's device.
  ActivityType activity = ActivityType::kCPU;
  bool times_ranges = false;
  // "" when it can record here; otherwise why not, in a sentence naming what is missing. May
  // load libraries the first time (a driver), so it is asked only of rows a window wants.
  std::string (*unavailable_reason)() = nullptr;
  // The backend for a window of `request`; called only when the request asks for this row and
  // it is available. May throw opscope::Error.
  std::unique_ptr<ActivityBackend> (*make)(const WindowRequest& request) = nullptr;
};

// Every row of this build, in the order their backends start: by file name, a test's row last.
std::vector<const BackendEntry*> backend_entries();

// Whether `request` asks for `entry` (whether or not it is available).
bool asks_for(const WindowRequest& request, const BackendEntry& entry);

// The backends of a window of `request`: one per row it asks for that is available here, in
// row order. What is asked for but unavailable is left out; the caller says so
// (SessionStats::not_recorded) from the reasons below.
std::vector<std::unique_ptr<ActivityBackend>> make_backends(const WindowRequest& request);

// Why `activity` cannot be recorded here: "" when a row records it and is available, else the
// first such row's reason (a sentence), or that this build has no backend for it.
std::string activity_unavailable_reason(ActivityType activity);

// The same for timing ranges on `device`'s device (the rows with times_ranges).
std::string range_timing_unavailable_reason(ActivityType device);

// Tests: `entry` becomes the last row (nullptr: no such row). Not thread-safe against windows
// opening at the same time; set it before and clear it after.
void set_test_backend_entry(const BackendEntry* entry);

}  // namespace opscope::backend

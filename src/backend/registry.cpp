#include "backend/registry.h"

#include <algorithm>
#include <atomic>

namespace opscope::backend {

// One declaration per src/backend/<name>_backend.cpp that is built (backends.inc, written by
// src/CMakeLists.txt).
#define OPSCOPE_BACKEND(name) const BackendEntry& name##_backend_entry();
#include "backends.inc"
#undef OPSCOPE_BACKEND

namespace {

std::atomic<const BackendEntry*> g_test_entry{nullptr};

bool asks_for_activity(const WindowRequest& request, ActivityType activity) {
  return std::find(request.activities.begin(), request.activities.end(), activity) !=
         request.activities.end();
}

// The reason of the first row `pick` selects: "" as soon as one is available.
template <typename Pick>
std::string first_reason(Pick pick, std::string_view nothing) {
  std::string reason;
  bool found = false;
  for (const BackendEntry* e : backend_entries()) {
    if (!pick(*e)) continue;
    std::string why = e->unavailable_reason();
    if (why.empty()) return why;
    if (!found) reason = std::move(why);
    found = true;
  }
  return found ? reason : std::string(nothing);
}

}  // namespace

std::vector<const BackendEntry*> backend_entries() {
  std::vector<const BackendEntry*> rows = {
#define OPSCOPE_BACKEND(name) &name##_backend_entry(),
#include "backends.inc"
#undef OPSCOPE_BACKEND
  };
  if (const BackendEntry* test = g_test_entry.load(std::memory_order_acquire)) {
    rows.push_back(test);
  }
  return rows;
}

bool asks_for(const WindowRequest& request, const BackendEntry& entry) {
  if (entry.times_ranges) return static_cast<bool>(request.timed_range_threads);
  return asks_for_activity(request, entry.activity);
}

std::vector<std::unique_ptr<ActivityBackend>> make_backends(const WindowRequest& request) {
  std::vector<std::unique_ptr<ActivityBackend>> out;
  for (const BackendEntry* e : backend_entries()) {
    // Availability is asked only of what the window wants: a CPU window probes no driver.
    if (asks_for(request, *e) && e->unavailable_reason().empty()) out.push_back(e->make(request));
  }
  return out;
}

std::string activity_unavailable_reason(ActivityType activity) {
  return first_reason(
      [activity](const BackendEntry& e) { return !e.times_ranges && e.activity == activity; },
      "this build of opscope has no backend that records it");
}

std::string range_timing_unavailable_reason(ActivityType device) {
  return first_reason(
      [device](const BackendEntry& e) { return e.times_ranges && e.activity == device; },
      "this build of opscope has no backend that times ranges on that device");
}

void set_test_backend_entry(const BackendEntry* entry) {
  g_test_entry.store(entry, std::memory_order_release);
}

}  // namespace opscope::backend

// The row of ranges timed on CUDA devices with CUDA events (registry.h): the legacy profiler's
// kCUDA and ExperimentalConfig::cuda_event_timing, done by CudaEventBackend (cuda_events.h)
// with the CUDA driver's entry points, or a test's (set_cuda_event_api_for_testing).
#include <atomic>
#include <memory>
#include <string>

#include "backend/cuda_events.h"
#include "backend/registry.h"

namespace opscope::backend {
namespace {

std::atomic<const CudaEventApi*> g_test_api{nullptr};

}  // namespace

void set_cuda_event_api_for_testing(const CudaEventApi* api) {
  g_test_api.store(api, std::memory_order_release);
}

const BackendEntry& cuda_events_backend_entry() {
  static constexpr BackendEntry kEntry{
      .name = "cuda_events",
      .activity = ActivityType::kCUDA,
      .times_ranges = true,
      .unavailable_reason = []() -> std::string {
        // A test's double needs no driver.
        if (g_test_api.load(std::memory_order_acquire) != nullptr) return "";
        return cuda_event_timing_unavailable_reason();
      },
      .make = [](const WindowRequest& request) -> std::unique_ptr<ActivityBackend> {
        const CudaEventApi* api = g_test_api.load(std::memory_order_acquire);
        return std::make_unique<CudaEventBackend>(api != nullptr ? *api : CudaEventApi::load(),
                                                  request.timed_range_threads);
      },
  };
  return kEntry;
}

}  // namespace opscope::backend

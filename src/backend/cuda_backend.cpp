// The row of CUDA activity (registry.h): kernels, copies, sets, runtime and driver calls,
// recorded by the CUPTI backend (cupti_tracer.h) where the probe (cuda_probe.h) finds a driver,
// a device and CUPTI, and says it can record.
//
// Built in every build, so that the reason CUDA cannot be recorded is the probe's wherever it
// runs; the CUPTI backend itself is built only with CUPTI's headers (OPSCOPE_HAVE_CUPTI), and
// without them the probe never says it can record (cuda_probe.cpp says why).
#include <memory>
#include <string>

#include "backend/cuda_probe.h"
#include "backend/registry.h"
#ifdef OPSCOPE_HAVE_CUPTI
#include "backend/cupti_tracer.h"
#endif

namespace opscope::backend {

const BackendEntry& cuda_backend_entry() {
  static constexpr BackendEntry kEntry{
      .name = "cuda",
      .activity = ActivityType::kCUDA,
      .unavailable_reason = [] { return cuda_probe().reason; },
      .make = [](const WindowRequest& request) -> std::unique_ptr<ActivityBackend> {
#ifdef OPSCOPE_HAVE_CUPTI
        return std::make_unique<CuptiBackend>(cuda_probe().cupti_path,
                                              request.epoch.buffer_limit_bytes);
#else
        (void)request;  // unreachable: the probe never says a build without CUPTI can record
        return nullptr;
#endif
      },
  };
  return kEntry;
}

}  // namespace opscope::backend

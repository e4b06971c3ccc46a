// Ranges timed on the GPU with CUDA events, as PyTorch's legacy profiler times them for
// use_cuda (and as torch falls back to when CUPTI cannot record).
//
// When a selected range begins and when it ends, an event is recorded into the legacy default
// stream of the calling thread's current CUDA context. The GPU reaches an event once the work
// queued before it on that device's blocking streams is done, so the time between a range's two
// events is the time the GPU took over what the range queued (and whatever was queued before
// it). Creating and recording an event costs a driver call or two per range end, as it does in
// torch; only ranges of threads the owner selects are timed.
//
// Each timed range becomes a span on its device, laid out by add_timed_ranges (gpu_activity.h):
// an EventKind::kGpuAnnotation named like the range, whose detail's gpu.external_id is the
// range's handle, on the thread "CUDA events" of the device's process ("GPU N"). key_averages()
// counts it as the range's CUDA time when the result holds no kernels, copies or sets (event_cuda),
// as torch appends it to the range as a kernel of the range's own name.
//
// The driver (libcuda.so.1) is loaded at run time; nothing CUDA is linked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/activity_backend.h"
#include "opscope/result.h"

namespace opscope::backend {

// The driver's entry points the timing calls. Handles are the driver's opaque pointers and
// every call returns a CUresult (0: CUDA_SUCCESS). Tests may fill one by hand.
struct CudaEventApi {
  int (*ctx_get_current)(void** context) = nullptr;
  int (*ctx_get_device)(int* device) = nullptr;
  int (*event_create)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_synchronize)(void* event) = nullptr;
  int (*event_elapsed_ms)(float* ms, void* from, void* to) = nullptr;
  int (*event_destroy)(void* event) = nullptr;

  // Resolves them in the CUDA driver `driver` (a name or path for dlopen). Throws
  // opscope::Error naming the library or the entry point that is missing.
  static CudaEventApi load(const std::string& driver = "libcuda.so.1");
};

// Tests: the windows that time ranges use `api` instead of the driver's, and count as able to
// (the row's unavailable_reason() is ""); nullptr: the driver again. Set it before a window
// opens and clear it after.
void set_cuda_event_api_for_testing(const CudaEventApi* api);

// "" when ranges can be timed with CUDA events here; otherwise why not, in a sentence: no
// driver or no device.
std::string cuda_event_timing_unavailable_reason();

class CudaEventBackend final : public ActivityBackend {
 public:
  // `selected`: whether the calling thread's ranges are timed (called at each range's start).
  CudaEventBackend(CudaEventApi api, std::function<bool()> selected);
  ~CudaEventBackend() override;

  std::string_view name() const override { return "cuda_events"; }
  // Registers the observer that records the events.
  void start() override;
  // Removes it: ranges that begin later are not timed, and a range still open now is not
  // timed either (its events are released when it ends).
  void stop() override;
  // Waits for the events, measures each range, and adds the spans. A device's first event is
  // placed at the CPU time it was recorded (the GPU reaches it then or later); the others by
  // their elapsed time from it. Durations are the driver's (resolution about 0.5 us). The
  // trace's "opscope_cuda_events" metadata states this and counts the ranges not timed.
  void collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) override;

  // What the observer writes; shared with it, since a range that began before stop() ends
  // (and calls the observer) after it.
  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::uint64_t observer_ = 0;
};

}  // namespace opscope::backend

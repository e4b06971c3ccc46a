#include "backend/cuda_events.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda_probe.h"
#include "backend/gpu_activity.h"
#include "opscope/error.h"
#include "opscope/internal/clock.h"
#include "opscope/observer.h"
#include "util/program_name.h"

namespace opscope::backend {

struct CudaEventBackend::Shared {
  CudaEventApi api;
  std::function<bool()> selected;
  std::mutex mu;  // guards the fields below
  bool open = false;
  struct Timed {
    std::uint64_t handle = 0;
    std::string name;  // a copy: a dynamic name lives only as long as its range
    std::int32_t device = 0;
    void* start = nullptr;
    void* end = nullptr;
    std::uint64_t start_ticks = 0;  // when the start event was recorded
  };
  std::vector<Timed> timed;
  std::uint64_t untimed = 0;  // no current context, a failed driver call, or a device change

  void count_untimed() {
    std::lock_guard<std::mutex> lock(mu);
    ++untimed;
  }
};

namespace {

constexpr unsigned kEventDefault = 0;  // CU_EVENT_DEFAULT: timing on

// A range's start event, from its start callback to its end callback.
struct StartMark final : ObserverContext {
  std::shared_ptr<CudaEventBackend::Shared> shared;
  void* event = nullptr;
  std::int32_t device = 0;
  std::uint64_t ticks = 0;

  ~StartMark() override {
    if (event != nullptr) shared->api.event_destroy(event);  // not handed over
  }
};

// An event recorded now into the legacy default stream of the calling thread's current
// context, and that context's device; nullptr when there is none or a call failed.
void* record_event(const CudaEventApi& api, std::int32_t* device) {
  void* context = nullptr;
  int d = -1;
  if (api.ctx_get_current(&context) != 0 || context == nullptr || api.ctx_get_device(&d) != 0) {
    return nullptr;
  }
  void* event = nullptr;
  if (api.event_create(&event, kEventDefault) != 0) return nullptr;
  if (api.event_record(event, nullptr) != 0) {
    api.event_destroy(event);
    return nullptr;
  }
  *device = d;
  return event;
}

template <typename F>
void resolve(void* lib, const std::string& driver, std::initializer_list<const char*> names,
             F& out) {
  for (const char* name : names) {
    out = reinterpret_cast<F>(::dlsym(lib, name));
    if (out != nullptr) return;
  }
  throw Error("cannot time ranges with CUDA events: the CUDA driver " + driver + " has no " +
              *names.begin());
}

}  // namespace

CudaEventApi CudaEventApi::load(const std::string& driver) {
  void* lib = ::dlopen(driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    throw Error("cannot time ranges with CUDA events: the CUDA driver " + driver +
                " could not be loaded (" + (why != nullptr ? why : "unknown error") + ")");
  }
  CudaEventApi api;
  resolve(lib, driver, {"cuCtxGetCurrent"}, api.ctx_get_current);
  resolve(lib, driver, {"cuCtxGetDevice"}, api.ctx_get_device);
  resolve(lib, driver, {"cuEventCreate"}, api.event_create);
  resolve(lib, driver, {"cuEventRecord"}, api.event_record);
  resolve(lib, driver, {"cuEventSynchronize"}, api.event_synchronize);
  // CUDA 12.8 added a _v2 whose result is defined for events on different contexts.
  resolve(lib, driver, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, api.event_elapsed_ms);
  resolve(lib, driver, {"cuEventDestroy_v2", "cuEventDestroy"}, api.event_destroy);
  return api;
}

std::string cuda_event_timing_unavailable_reason() {
  const CudaProbe& probe = cuda_probe();
  if (probe.driver_version == 0 || probe.devices == 0) return probe.reason;
  return {};
}

CudaEventBackend::CudaEventBackend(CudaEventApi api, std::function<bool()> selected)
    : shared_(std::make_shared<Shared>()) {
  shared_->api = api;
  shared_->selected = std::move(selected);
}

CudaEventBackend::~CudaEventBackend() {
  stop();
  std::lock_guard<std::mutex> lock(shared_->mu);
  for (const Shared::Timed& t : shared_->timed) {
    shared_->api.event_destroy(t.start);
    shared_->api.event_destroy(t.end);
  }
  shared_->timed.clear();
}

void CudaEventBackend::start() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->open = true;
  }
  std::shared_ptr<Shared> shared = shared_;
  observer_ = add_global_callback(
      RecordFunctionCallback(
          [shared](const RecordFunction&) -> std::unique_ptr<ObserverContext> {
            if (!shared->selected()) return nullptr;
            auto mark = std::make_unique<StartMark>();
            mark->shared = shared;
            mark->ticks = internal::ticks();
            mark->event = record_event(shared->api, &mark->device);
            if (mark->event == nullptr) {
              shared->count_untimed();
              return nullptr;
            }
            return mark;
          },
          [shared](const RecordFunction& rf, ObserverContext* context) {
            auto* mark = static_cast<StartMark*>(context);
            if (mark == nullptr) return;
            std::int32_t device = -1;
            void* end = record_event(shared->api, &device);
            std::lock_guard<std::mutex> lock(shared->mu);
            if (end == nullptr || device != mark->device || !shared->open) {
              ++shared->untimed;
              if (end != nullptr) shared->api.event_destroy(end);
              return;  // the start event goes with the mark
            }
            shared->timed.push_back({rf.handle(), std::string(rf.name()), device,
                                     std::exchange(mark->event, nullptr), end, mark->ticks});
          })
          .needs_ids(true));
}

void CudaEventBackend::stop() {
  if (observer_ != 0) {
    remove_callback(observer_);
    observer_ = 0;
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->open = false;
}

void CudaEventBackend::collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) {
  std::vector<Shared::Timed> timed;
  std::uint64_t untimed = 0;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    timed = std::move(shared_->timed);
    shared_->timed.clear();
    untimed = shared_->untimed;
  }
  const CudaEventApi& api = shared_->api;
  // Each device's first start event is its base: placed when it was recorded.
  std::map<std::int32_t, const Shared::Timed*> base;
  for (const Shared::Timed& t : timed) {
    auto [it, added] = base.try_emplace(t.device, &t);
    if (!added && t.start_ticks < it->second->start_ticks) it->second = &t;
  }
  std::vector<TimedRange> spans;
  spans.reserve(timed.size());
  for (const Shared::Timed& t : timed) {
    const Shared::Timed& b = *base[t.device];
    float from_base_ms = 0;
    float duration_ms = 0;
    if (api.event_synchronize(t.end) != 0 ||
        api.event_elapsed_ms(&from_base_ms, b.start, t.start) != 0 ||
        api.event_elapsed_ms(&duration_ms, t.start, t.end) != 0) {
      ++untimed;
      continue;
    }
    const std::int64_t start_ns =
        conv.to_wall_ns(b.start_ticks) + std::llround(static_cast<double>(from_base_ms) * 1e6);
    spans.push_back({t.handle, t.name, t.device, start_ns,
                     start_ns + std::llround(static_cast<double>(duration_ms) * 1e6)});
  }
  for (const Shared::Timed& t : timed) {
    api.event_destroy(t.start);
    api.event_destroy(t.end);
  }
  add_timed_ranges(builder, std::move(spans), util::program_name());
  builder.add_metadata(
      "opscope_cuda_events",
      "{\"placement\": \"each device's first event at the CPU time it was recorded\", "
      "\"untimed_ranges\": " +
          std::to_string(untimed) + "}");
}

}  // namespace opscope::backend

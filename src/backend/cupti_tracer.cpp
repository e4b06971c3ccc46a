#include "backend/cupti_tracer.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <set>
#include <utility>

#include "backend/cuda_devices.h"
#include "backend/cuda_probe.h"
#include "clock/clock.h"
#include "opscope/error.h"
#include "opscope/internal/clock.h"
#include "util/program_name.h"

namespace opscope::backend {
namespace {

// CUPTI's state in this process (see the header): the window whose backend takes the buffers,
// and the libraries whose callbacks are registered. Never destroyed: CUPTI may call back during
// static destruction.
struct CuptiProcess {
  std::mutex mu;                   // serialises the callbacks with a window leaving
  CuptiBackend* window = nullptr;  // under mu
  std::set<std::string> registered;
};
CuptiProcess& cupti_process() {
  static auto* p = new CuptiProcess;
  return *p;
}

// The loaded CUPTI's cuptiGetTimestamp, for cupti_now_ns (a plain function, as
// clock::measure_offset takes).
std::atomic<decltype(&cuptiGetTimestamp)> g_timestamp{nullptr};

// Kineto's buffer size: large enough that a busy GPU fills one every few milliseconds at most.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;
constexpr std::size_t kAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT

// What Kineto records by default for CUDA.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,  // first, so that no launch misses its range
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,  // what event syncs wait on (Kineto enables it with syncs)
    CUPTI_ACTIVITY_KIND_MEMORY2,
};

void free_buffer(std::uint8_t* buffer) { ::operator delete (buffer, std::align_val_t{kAlignment}); }

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                  std::size_t* max_records) {
  *max_records = 0;  // as many as fit
  CuptiProcess& p = cupti_process();
  std::lock_guard<std::mutex> lock(p.mu);
  *buffer = p.window != nullptr ? p.window->new_buffer(*size) : nullptr;
  if (*buffer == nullptr) *size = 0;
}

void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                  std::size_t, std::size_t valid_size) {
  CuptiProcess& p = cupti_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.window != nullptr) {
    if (buffer != nullptr) p.window->take_buffer(buffer, valid_size);
    p.window->count_dropped(context, stream);
  } else if (buffer != nullptr) {
    free_buffer(buffer);  // a window that is gone
  }
}

template <typename F>
void resolve(void* lib, const std::string& path, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr) {
    throw Error("cannot record CUDA activity: " + path + " has no " + name +
                " (a CUPTI older than CUDA 13's?)");
  }
}

}  // namespace

CuptiApi CuptiApi::load(const std::string& path) {
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    throw Error("cannot record CUDA activity: CUPTI " + path + " could not be loaded (" +
                (why != nullptr ? why : "unknown error") + ")");
  }
  CuptiApi api;
  resolve(lib, path, "cuptiActivityEnable", api.activity_enable);
  resolve(lib, path, "cuptiActivityDisable", api.activity_disable);
  resolve(lib, path, "cuptiActivityRegisterCallbacks", api.register_callbacks);
  resolve(lib, path, "cuptiActivityFlushAll", api.flush_all);
  resolve(lib, path, "cuptiActivityGetNextRecord", api.next_record);
  resolve(lib, path, "cuptiActivityGetNumDroppedRecords", api.dropped_records);
  resolve(lib, path, "cuptiActivityPushExternalCorrelationId", api.push_external);
  resolve(lib, path, "cuptiActivityPopExternalCorrelationId", api.pop_external);
  resolve(lib, path, "cuptiGetCallbackName", api.callback_name);
  resolve(lib, path, "cuptiGetResultString", api.result_string);
  resolve(lib, path, "cuptiSetThreadIdType", api.set_thread_id_type);
  resolve(lib, path, "cuptiGetTimestamp", api.timestamp);
  // CUPTI 12.x and later; without it, every driver call is recorded and the launches kept.
  api.enable_driver_api = reinterpret_cast<decltype(api.enable_driver_api)>(
      ::dlsym(lib, "cuptiActivityEnableDriverApi"));
  api.version = reinterpret_cast<decltype(api.version)>(::dlsym(lib, "cuptiGetVersion"));
  return api;
}

std::string CuptiApi::error(CUptiResult code) const {
  const char* text = nullptr;
  if (result_string != nullptr && result_string(code, &text) == CUPTI_SUCCESS && text != nullptr) {
    return std::string(text) + " (" + std::to_string(static_cast<int>(code)) + ")";
  }
  return "CUPTI error " + std::to_string(static_cast<int>(code));
}

std::string CuptiApi::api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) const {
  const CUpti_CallbackDomain domain =
      kind == CUPTI_ACTIVITY_KIND_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
  const char* name = nullptr;
  if (callback_name == nullptr || callback_name(domain, cbid, &name) != CUPTI_SUCCESS ||
      name == nullptr) {
    return "";
  }
  return std::string(without_version_suffix(name));
}

CuptiBackend::CuptiBackend(std::string cupti_path, std::uint64_t buffer_limit_bytes)
    : path_(std::move(cupti_path)),
      buffer_limit_(std::max<std::uint64_t>(buffer_limit_bytes, kBufferBytes)) {}

CuptiBackend::~CuptiBackend() {
  // A window that failed half-way: nothing may call back into this object any more.
  if (observer_ != 0) remove_callback(observer_);
  disable_all();
  CuptiProcess& p = cupti_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.window == this) p.window = nullptr;
}

void CuptiBackend::load_library() {
  if (api_.next_record != nullptr) return;
  api_ = CuptiApi::load(path_);
  g_timestamp.store(api_.timestamp, std::memory_order_release);
  records_.context().api_name = [this](CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
    return api_.api_name(kind, cbid);
  };
}

void CuptiBackend::prepare() {
  if (prepared_) return;
  load_library();
  // The devices as Kineto describes them; their SM counts give kernels' blocks and warps per
  // SM, which take_buffer() computes as the records arrive: known before the window opens.
  devices_ = query_cuda_devices();
  for (const DeviceProperties& d : devices_) {
    records_.context().sm_count[static_cast<std::uint32_t>(d.id)] = d.num_sms;
  }
  CuptiProcess& p = cupti_process();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.registered.contains(path_)) {
      prepared_ = true;
      return;
    }
  }
  // Calls carry the OS thread id (gettid), which is what the CPU backend's threads have.
  if (const CUptiResult rc = api_.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
      rc != CUPTI_SUCCESS) {
    throw Error("cannot record CUDA activity: cuptiSetThreadIdType: " + api_.error(rc));
  }
  if (const CUptiResult rc = api_.register_callbacks(on_buffer_requested, on_buffer_completed);
      rc != CUPTI_SUCCESS) {
    throw Error("cannot record CUDA activity: cuptiActivityRegisterCallbacks: " + api_.error(rc));
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.registered.insert(path_);
  prepared_ = true;
}

void CuptiBackend::start() {
  prepare();
  CuptiProcess& p = cupti_process();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.window != nullptr) {
      throw Error("cannot record CUDA activity: another window records it already");
    }
    p.window = this;
  }
  const auto leave = [&] {
    disable_all();
    std::lock_guard<std::mutex> lock(p.mu);
    p.window = nullptr;
  };
  // What began before this is another window's (or none's): CuptiRecords drops it.
  records_.context().window_start = static_cast<std::uint64_t>(cupti_now_ns());
  for (const CUpti_ActivityKind kind : kKinds) {
    if (const CUptiResult rc = api_.activity_enable(kind); rc != CUPTI_SUCCESS) {
      leave();
      throw Error("cannot record CUDA activity: cuptiActivityEnable(" +
                  std::to_string(static_cast<int>(kind)) + "): " + api_.error(rc));
    }
    enabled_.push_back(kind);
  }
  enable_driver_launches();
  // Each range's handle is CUPTI's external correlation id while it runs: the launches made
  // inside it carry it ("External id"), as Kineto does with the op's id. The callbacks hold
  // CUPTI's functions, not this backend: a range open at stop() ends after the backend is gone.
  const auto push = api_.push_external;
  const auto pop = api_.pop_external;
  observer_ =
      add_global_callback(RecordFunctionCallback(
                              [push](const RecordFunction& rf) -> std::unique_ptr<ObserverContext> {
                                push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, rf.handle());
                                return nullptr;
                              },
                              [pop](const RecordFunction&, ObserverContext*) {
                                std::uint64_t popped = 0;
                                pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
                              })
                              .needs_ids(true));
}

void CuptiBackend::stop() {
  if (observer_ != 0) {
    remove_callback(observer_);
    observer_ = 0;
  }
  // What begins after this is the next window's.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    records_.context().window_end = static_cast<std::uint64_t>(cupti_now_ns());
  }
  disable_all();
  // Every record still in CUPTI's hands, delivered to take_buffer before this returns (the
  // callback takes the process lock: it must not be held here).
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CuptiProcess& p = cupti_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.window == this) p.window = nullptr;
}

// kDriverLaunches one by one (cuptiActivityEnableDriverApi), not CUPTI_ACTIVITY_KIND_DRIVER,
// which records every driver call: a record per nvcc-13 launch (its cuKernelGetName) that costs
// launch time and is thrown away (seen on an H200: tests/data/gpu).
void CuptiBackend::enable_driver_launches() {
  if (api_.enable_driver_api != nullptr) {
    for (const CUpti_CallbackId cbid : kDriverLaunches) {
      if (api_.enable_driver_api(cbid, 1) == CUPTI_SUCCESS) driver_apis_.push_back(cbid);
    }
    if (driver_apis_.size() == std::size(kDriverLaunches)) return;
    for (const CUpti_CallbackId cbid : driver_apis_) api_.enable_driver_api(cbid, 0);
    driver_apis_.clear();
  }
  // All driver calls, then; CuptiRecords keeps the launches.
  if (api_.activity_enable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS) {
    enabled_.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
}

void CuptiBackend::disable_all() {
  for (const CUpti_ActivityKind kind : enabled_) api_.activity_disable(kind);
  enabled_.clear();
  for (const CUpti_CallbackId cbid : driver_apis_) api_.enable_driver_api(cbid, 0);
  driver_apis_.clear();
}

void CuptiBackend::collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Against CUPTI's own timestamp: its clock is CLOCK_REALTIME unless a timestamp callback
  // (Kineto's TSC clock, in a process where torch's profiler ran) replaced it.
  const clock::ClockOffset offset = clock::measure_offset(conv, cupti_now_ns);
  records_.context().offset_ns = offset.offset_ns;
  if (!devices_.empty()) builder.set_device_properties(device_properties_json(devices_));
  records_.context().process_name = util::program_name();
  records_.emit(builder);
  // The versions Kineto states at the top of its traces.
  if (std::uint32_t version = 0;
      api_.version != nullptr && api_.version(&version) == CUPTI_SUCCESS) {
    builder.add_metadata("cupti_version", std::to_string(version));
  }
  if (const int driver = cuda_probe().driver_version; driver > 0) {
    builder.add_metadata("cuda_driver_version", std::to_string(driver));
  }
  builder.add_metadata(
      "opscope_gpu_clock",
      "{\"method\":\"cuptiGetTimestamp, offset to the ranges' clock measured at collect\","
      "\"offset_ns\":" +
          std::to_string(offset.offset_ns) + ",\"error_ns\":" + std::to_string(offset.error_ns) +
          "}");
  builder.add_metadata("opscope_gpu_records_discarded",
                       "{\"incomplete\":" + std::to_string(records_.incomplete()) +
                           ",\"outside_window\":" + std::to_string(records_.outside_window()) +
                           "}");
  builder.stats().events_dropped += dropped_;
  builder.stats().gpu_records_discarded += records_.incomplete() + records_.outside_window();
}

void CuptiBackend::count_dropped(CUcontext context, std::uint32_t stream) {
  std::size_t dropped = 0;
  if (api_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped_ += dropped;
  }
}

std::uint8_t* CuptiBackend::new_buffer(std::size_t& size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if ((buffers_in_use_ + 1) * kBufferBytes > buffer_limit_) return nullptr;  // CUPTI drops
  auto* buffer = static_cast<std::uint8_t*>(
      ::operator new (kBufferBytes, std::align_val_t{kAlignment}, std::nothrow));
  if (buffer == nullptr) return nullptr;  // CUPTI drops; the budget is not spent
  ++buffers_in_use_;
  size = kBufferBytes;
  return buffer;
}

void CuptiBackend::take_buffer(std::uint8_t* buffer, std::size_t valid_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  CUpti_Activity* record = nullptr;
  while (api_.next_record(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    records_.add(*record);
  }
  free_buffer(buffer);
  if (buffers_in_use_ > 0) --buffers_in_use_;
}

std::int64_t cupti_now_ns() {
  std::uint64_t now = 0;
  if (const auto get = g_timestamp.load(std::memory_order_acquire); get != nullptr) get(&now);
  return static_cast<std::int64_t>(now);
}

}  // namespace opscope::backend

// A stand-in for libcupti with the entry points the CUPTI backend resolves, for testing the
// backend's window logic on a machine without a GPU: registration, the external-correlation
// stack, flushing buffers through the backend's callbacks, and CUPTI's clock. It proves
// nothing about CUPTI itself (the toolkit's real libcupti and the GPU run in tests/gpu do);
// it makes what the backend does around CUPTI observable.
//
// The test side queues records (fake_cupti_queue) that the next cuptiActivityFlushAll hands to
// the registered buffer callbacks, reads what was called (fake_cupti_counts), and shifts the
// clock cuptiGetTimestamp reads from CLOCK_REALTIME (fake_cupti_set_clock_shift_ns).
#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

namespace {

constexpr std::size_t kSlot = 512;  // every queued record takes one slot of a buffer

struct Fake {
  std::mutex mu;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  std::vector<std::vector<std::uint8_t>> queued;
  std::int64_t clock_shift_ns = 0;
  int registrations = 0;
  int thread_id_type_calls = 0;
  int pushes = 0;
  int pops = 0;
  int enabled = 0;
  int driver_apis = 0;      // enabled one by one (cuptiActivityEnableDriverApi)
  bool all_driver = false;  // CUPTI_ACTIVITY_KIND_DRIVER enabled
};
Fake& fake() {
  static auto* f = new Fake;
  return *f;
}

}  // namespace

extern "C" {

struct FakeCuptiCounts {
  int registrations;
  int thread_id_type_calls;
  int pushes;
  int pops;
  int enabled;      // kinds enabled now
  int driver_apis;  // driver calls enabled one by one now
  int all_driver;   // CUPTI_ACTIVITY_KIND_DRIVER enabled now
};

__attribute__((visibility("default"))) void fake_cupti_queue(const void* record, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(record);
  std::lock_guard<std::mutex> lock(fake().mu);
  fake().queued.emplace_back(p, p + size);
}

__attribute__((visibility("default"))) FakeCuptiCounts fake_cupti_counts() {
  std::lock_guard<std::mutex> lock(fake().mu);
  const Fake& f = fake();
  return {f.registrations, f.thread_id_type_calls, f.pushes, f.pops, f.enabled,
          f.driver_apis,   f.all_driver ? 1 : 0};
}

__attribute__((visibility("default"))) void fake_cupti_set_clock_shift_ns(std::int64_t shift) {
  std::lock_guard<std::mutex> lock(fake().mu);
  fake().clock_shift_ns = shift;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::lock_guard<std::mutex> lock(fake().mu);
  *timestamp =
      static_cast<uint64_t>(ts.tv_sec * 1'000'000'000LL + ts.tv_nsec + fake().clock_shift_ns);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(fake().mu);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) fake().all_driver = true;
  ++fake().enabled;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(fake().mu);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) fake().all_driver = false;
  --fake().enabled;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId, uint8_t enable) {
  std::lock_guard<std::mutex> lock(fake().mu);
  fake().driver_apis += enable != 0 ? 1 : -1;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
  std::lock_guard<std::mutex> lock(fake().mu);
  ++fake().registrations;
  fake().requested = requested;
  fake().completed = completed;
  return CUPTI_SUCCESS;
}

// Hands every queued record over, as CUPTI does: a buffer from the request callback, filled,
// then the completion callback (on the calling thread, as a forced flush may).
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  std::vector<std::vector<std::uint8_t>> records;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  {
    std::lock_guard<std::mutex> lock(fake().mu);
    records.swap(fake().queued);
    requested = fake().requested;
    completed = fake().completed;
  }
  if (records.empty() || requested == nullptr || completed == nullptr) return CUPTI_SUCCESS;
  std::uint8_t* buffer = nullptr;
  std::size_t size = 0;
  std::size_t max_records = 0;
  requested(&buffer, &size, &max_records);
  std::size_t used = 0;
  if (buffer != nullptr) {
    for (const auto& r : records) {
      if (used + kSlot > size) break;
      std::memcpy(buffer + used, r.data(), r.size() < kSlot ? r.size() : kSlot);
      used += kSlot;
    }
  }
  completed(nullptr, 0, buffer, size, used);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
  std::uint8_t* next =
      *record == nullptr ? buffer : reinterpret_cast<std::uint8_t*>(*record) + kSlot;
  if (next + kSlot > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                            uint64_t) {
  std::lock_guard<std::mutex> lock(fake().mu);
  ++fake().pushes;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                           uint64_t* id) {
  std::lock_guard<std::mutex> lock(fake().mu);
  ++fake().pops;
  if (id != nullptr) *id = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cudaLaunchKernel_v7000";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult, const char** text) {
  *text = "FAKE_CUPTI_RESULT";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = 130001;  // CUDA 13.0's CUPTI_API_VERSION
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType) {
  std::lock_guard<std::mutex> lock(fake().mu);
  ++fake().thread_id_type_calls;
  return CUPTI_SUCCESS;
}

}  // extern "C"

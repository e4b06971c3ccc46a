// The CUPTI backend: GPU activity of a window through CUPTI's activity API, loaded at run time
// from the libcupti the probe found (cuda_probe.h), never linked.
//
// prepare() resolves CUPTI's entry points and registers the buffer callbacks; start() enables
// the activity kinds Kineto records (concurrent kernels, memcpy, memset, runtime and driver
// calls, synchronization, CUDA allocations, external correlation) and adds a global observer
// that pushes each range's handle as CUPTI's external correlation id while the range runs, so
// every launch carries the innermost range open on its thread; stop() removes the observer,
// disables the kinds and flushes every buffer; collect() measures how far CUPTI's clock is from
// the ranges' (against cuptiGetTimestamp: CUPTI's clock is whatever its timestamp callback says,
// and Kineto switches it to the TSC) and hands the records, shifted by that, to CuptiRecords,
// which drops the incomplete ones and those that began outside the window, as Kineto does.
// Buffers come from a budget (the window's buffer limit); what CUPTI could not hand over is
// counted in SessionStats::events_dropped.
//
// CUPTI has one set of buffer callbacks per process, whatever window is open: they are
// registered once, and find the open window's backend in a process-wide slot that the backend
// leaves, under a lock, before it is destroyed. A range still open when the window stops ends
// through function pointers into libcupti (never unloaded), not through the backend.
//
// Built only with CUPTI's headers (OPSCOPE_CUPTI). Its row in the backend registry is "cuda"
// (cuda_backend.cpp), which is built without them too. Checked on an H200 by
// tests/gpu/device_check.sh (its trace: tests/data/gpu/).
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/activity_backend.h"
#include "backend/cuda_devices.h"
#include "backend/cupti_records.h"
#include "opscope/observer.h"

namespace opscope::backend {

// CUPTI's entry points the backend calls, resolved from a loaded libcupti.
struct CuptiApi {
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;  // may be missing
  decltype(&cuptiGetVersion) version = nullptr;                         // may be missing

  // Loads `path` (dlopen) and resolves every entry point above. Throws opscope::Error naming
  // the library and what is missing.
  static CuptiApi load(const std::string& path);
  // "CUPTI_ERROR_NOT_INITIALIZED (15)", from CUPTI's own names.
  std::string error(CUptiResult code) const;
  // The name of a runtime or driver call without its version suffix: "cudaLaunchKernel".
  std::string api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) const;
};

class CuptiBackend final : public ActivityBackend {
 public:
  // `buffer_limit_bytes`: the most CUPTI buffer memory in use at once.
  CuptiBackend(std::string cupti_path, std::uint64_t buffer_limit_bytes);
  ~CuptiBackend() override;

  std::string_view name() const override { return "cuda"; }
  // Loads libcupti and resolves its entry points (the first thing prepare() does; the tests
  // call it alone, as reading buffers needs no driver).
  void load_library();
  // load_library(), then, once per process and library, CUPTI told to name threads by OS tid
  // and to call back for buffers.
  void prepare() override;
  // Throws opscope::Error with CUPTI's reason when an activity kind cannot be enabled (no
  // driver, no device); what was enabled is disabled again.
  void start() override;
  void stop() override;
  void collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) override;

  // A buffer CUPTI completed: its records read (cuptiActivityGetNextRecord) into the window's,
  // the buffer freed. What CUPTI's completion callback calls; public for the tests, which hand
  // it buffers as CUPTI fills them.
  void take_buffer(std::uint8_t* buffer, std::size_t valid_size);
  // A buffer for CUPTI to fill, or nullptr when the budget is spent (CUPTI then drops records).
  std::uint8_t* new_buffer(std::size_t& size);
  // Adds what CUPTI says it dropped on this context and stream (SessionStats::events_dropped).
  void count_dropped(CUcontext context, std::uint32_t stream);

 private:
  std::string path_;
  std::uint64_t buffer_limit_;
  CuptiApi api_;
  bool prepared_ = false;
  std::vector<DeviceProperties> devices_;  // queried at prepare()
  // Records the driver calls that launch kernels, and those only where CUPTI can be asked for
  // them one by one; else every driver call.
  void enable_driver_launches();
  // Undoes start()'s enabling.
  void disable_all();

  std::vector<CUpti_ActivityKind> enabled_;
  std::vector<CUpti_CallbackId> driver_apis_;  // enabled one by one
  CallbackHandle observer_ = 0;
  std::mutex mutex_;  // records_ and the budget: CUPTI calls back on its own threads
  CuptiRecords records_{CuptiContext{}};
  std::uint64_t buffers_in_use_ = 0;
  std::uint64_t dropped_ = 0;  // records CUPTI could not keep (no buffer, or a full one)
};

// CUPTI's clock now (cuptiGetTimestamp of the last CUPTI a backend loaded), in ns; 0 before any.
std::int64_t cupti_now_ns();

}  // namespace opscope::backend

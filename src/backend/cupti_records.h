// CUPTI activity records into the result model, as Kineto lays them out in its traces
// (../shared/peers/kineto-traces): each record is translated into a vendor-neutral GpuRecord
// with Kineto's names and args for it, and backend::GpuActivity (gpu_activity.h) lays those out:
// devices, streams, calls, "ac2g" flows and "External id"s from CUPTI's external correlation.
//
// The records are CUDA 13's (cupti_activity.h): their layouts are what a live CUPTI hands
// over, so the unit tests build them as CUPTI would and the live backend passes its buffers
// through unchanged. Built only with CUPTI's headers (OPSCOPE_CUPTI).
#pragma once

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend/gpu_activity.h"
#include "opscope/result.h"

namespace opscope::backend {

// What the records do not carry.
struct CuptiContext {
  // The name of a runtime or driver call: "cudaLaunchKernel" (the live backend asks CUPTI,
  // cuptiGetCallbackName, and drops the "_v7000" suffix as Kineto does).
  std::function<std::string(CUpti_ActivityKind kind, CUpti_CallbackId cbid)> api_name;
  // Streaming multiprocessors per device, for Kineto's "blocks per SM" and "warps per SM";
  // a device not listed gets neither.
  std::map<std::uint32_t, int> sm_count;
  // Added to every CUPTI time (ns) to put it on the clock of the CPU ranges.
  std::int64_t offset_ns = 0;
  // The program's name: Kineto names each device's process with it ("python3.10", labelled
  // "GPU 0").
  std::string process_name;
  // The window, on CUPTI's clock (0: open-ended): a record that began outside it is dropped,
  // as Kineto drops it (work launched before the window, calls of the next one).
  std::uint64_t window_start = 0;
  std::uint64_t window_end = 0;
};

// Kineto's names for what a copy or set touches ("Pageable", "Device", ...) and its direction
// ("HtoD", ...): "Memcpy HtoD (Pageable -> Device)", "Memset (Device)".
std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind);
std::string memset_name(std::uint16_t memory_kind);
// The driver calls that launch kernels (Triton's, and programs that launch through the driver
// API): the only driver calls Kineto keeps, so the only ones recorded (the tracer asks CUPTI for
// these alone) and translated. The others are the runtime's own work inside calls the trace
// has already (nvcc 13's launches each make a cuKernelGetName).
inline constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel".
std::string_view without_version_suffix(std::string_view api_name);

class CuptiRecords {
 public:
  explicit CuptiRecords(CuptiContext context) : context_(std::move(context)) {}

  // What the records do not carry; the clock offset may be set until emit().
  CuptiContext& context() { return context_; }

  // One record, of any kind; its fields are copied (CUPTI reuses its buffers). Kinds not
  // handled are counted, not kept (skipped()).
  void add(const CUpti_Activity& record);

  // Adds everything to `builder` (GpuActivity::emit, with the context's clock offset and
  // process name). May be called once.
  void emit(ProfilerResult::Builder& builder);

  std::uint64_t skipped() const { return skipped_; }
  // Records dropped: CUPTI's unfinished ones (a zero start or end, or an end before the start:
  // what a forced flush hands over), and those that began outside the window. Counted, so that
  // a trace says what it lacks.
  std::uint64_t incomplete() const { return incomplete_; }
  std::uint64_t outside_window() const { return outside_window_; }

 private:
  // What every record of GPU work has (kernels, copies and sets name these fields alike).
  template <typename Record>
  static GpuRecord gpu_work(EventKind kind, std::string name, const Record& r);
  // A copy or set: its bytes and Kineto's args for them, kept.
  void add_transfer(GpuRecord p, std::uint64_t bytes);
  void add_kernel(const CUpti_ActivityKernel10& k);
  void add_memcpy(const CUpti_ActivityMemcpy6& m);
  void add_memset(const CUpti_ActivityMemset4& m);
  void add_api(const CUpti_ActivityAPI& a);
  void add_memory(const CUpti_ActivityMemory4& m);
  // A cudaEvent recorded on a stream: kept to say what an event sync waits on, and laid out
  // as Kineto does when CUPTI gave it a device time.
  void add_cuda_event(const CUpti_ActivityCudaEvent2& e);
  // The syncs, translated at emit(), when every event record they may wait on is in.
  void add_syncs();

  // CUPTI's times as they are; context_.offset_ns is added at emit().
  static std::int64_t ns(std::uint64_t cupti_ns) { return static_cast<std::int64_t>(cupti_ns); }

  // Whether a record that ran from `start` to `end` (CUPTI's times) is kept; counts it if not.
  // `end` is `start` for an instant (an allocation).
  bool admit(std::uint64_t start, std::uint64_t end);

  CuptiContext context_;
  GpuActivity activity_;
  std::vector<CUpti_ActivitySynchronization2> syncs_;
  std::vector<CUpti_ActivityCudaEvent2> cuda_events_;
  std::uint64_t skipped_ = 0;
  std::uint64_t incomplete_ = 0;
  std::uint64_t outside_window_ = 0;
};

}  // namespace opscope::backend

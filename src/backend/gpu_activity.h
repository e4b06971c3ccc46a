// GPU activity laid out as Kineto lays it out in its traces (../shared/peers/kineto-traces),
// whatever recorded it: a process per device ("GPU N"), a "stream N" thread per stream (and
// thread -1, "Device N", for syncs on no stream), runtime and driver calls on the CPU threads
// that made them, "ac2g" flows from each call to the work it launched and to the syncs it
// waited in, and "External id"s joining launches to the range they ran in.
//
// A vendor's backend only translates its own records into GpuRecords (cupti_records.cpp does
// CUPTI's) and adds them here; the layout above is built once, in emit(). A second vendor
// (ROCm's roctracer, say) adds its own translation, not a copy of this.
//
//   GpuActivity activity;
//   activity.add(record);                    // one per kernel, copy, set, call, sync, allocation
//   activity.add_external_id(correlation, range_handle);
//   activity.emit(builder, clock_offset_ns, util::program_name());
//
// Ranges timed on a device (the legacy profiler's kCUDA, torch's use_cuda fallback) are laid
// out by add_timed_ranges().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "opscope/result.h"

namespace opscope::backend {

// Kineto's process of a GPU in a trace: named after the program, labelled "GPU N", sorted
// after the CPU processes. Every backend that puts events on a device uses it.
ProcessInfo gpu_process(std::int32_t device, const std::string& program_name);

// One record of GPU activity, in the vendor's times (emit() adds the clock offset): work on a
// stream (a kernel, copy or set), a call on a CPU thread (runtime, driver), a sync, or an
// allocation.
struct GpuRecord {
  // The stream of a record on none: a context's sync, an event's. Kineto puts those on thread
  // -1 of the device's process (CUPTI's 0xFFFFFFFF read as an int32), named "Device N".
  static constexpr std::uint32_t kNoStream = 0xFFFFFFFFu;
  EventKind kind = EventKind::kOther;
  std::string_view category;  // "" for the kind's implied one
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  bool device_known = true;  // false: a sync, whose device is its context's
  std::uint32_t context = 0;
  std::uint32_t stream = 0;       // GPU side; kNoStream: none (below)
  std::uint64_t thread_id = 0;    // calls: the OS thread that made them
  std::uint32_t correlation = 0;  // 0: none
  bool gpu_side = false;          // on a stream thread; else a CPU thread
  GpuInfo gpu;
  std::string other_args;  // JSON object text, or ""
  MemoryUse memory;        // kMemory
};

class GpuActivity {
 public:
  // Keeps `record` until emit().
  void add(GpuRecord record) { records_.push_back(std::move(record)); }
  // The External id of the work and calls of `correlation`: the handle of the innermost range
  // open on the launching thread. The first one given for a correlation is kept.
  void add_external_id(std::uint32_t correlation, std::uint64_t external_id) {
    external_id_.try_emplace(correlation, external_id);
  }

  // Adds everything to `builder`, every time shifted by `offset_ns` onto the CPU ranges' clock:
  // devices as processes named `process_name`, streams as their threads, events with their
  // details and flows. A sync's device is its context's, as the other records name it. Calls
  // whose thread the builder does not have yet (no range of it was recorded) get a thread of
  // their own. Empties what was added.
  void emit(ProfilerResult::Builder& builder, std::int64_t offset_ns,
            const std::string& process_name);

 private:
  std::vector<GpuRecord> records_;
  std::unordered_map<std::uint32_t, std::uint64_t> external_id_;  // correlation -> External id
};

// One range timed on a device, its times on the CPU ranges' clock (ns since the Unix epoch).
struct TimedRange {
  std::uint64_t handle = 0;  // the range's
  std::string_view name;     // the range's (copied into the result)
  std::int32_t device = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// Adds `ranges` as torch lays out ranges timed with CUDA events: a process per device named
// `process_name`, labelled "GPU N", a thread "CUDA events" in each, and a kGpuAnnotation per
// range whose detail's gpu.external_id is the range's handle. The legacy profiler's lists come
// back into a result through this.
void add_timed_ranges(ProfilerResult::Builder& builder, std::vector<TimedRange> ranges,
                      const std::string& process_name);

}  // namespace opscope::backend

#include "backend/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "json/json_writer.h"

namespace opscope::backend {
namespace {

// A kernel's name as Kineto shows it: demangled when it is a mangled C++ name.
std::string demangled(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string_view memory_kind_name(std::uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

std::string_view copy_kind_name(std::uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

std::string_view sync_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "Event Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "Stream Wait Event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "Stream Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "Context Sync";
    default:
      return "Unknown Sync";
  }
}

// Kineto's bandwidth: bytes per ns, which is GB/s.
double gbps(std::uint64_t bytes, std::int64_t duration_ns) {
  return duration_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(duration_ns) : 0.0;
}

// The members of a JSON object written by `fill` (a JsonWriter inside an object), as text.
template <typename Fill>
std::string object_text(Fill&& fill) {
  internal::JsonWriter w;
  w.begin_object();
  fill(w);
  w.end_object();
  return std::string(w.view());
}

}  // namespace

std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind) {
  return "Memcpy " + std::string(copy_kind_name(copy_kind)) + " (" +
         std::string(memory_kind_name(src_kind)) + " -> " +
         std::string(memory_kind_name(dst_kind)) + ")";
}

std::string memset_name(std::uint16_t memory_kind) {
  return "Memset (" + std::string(memory_kind_name(memory_kind)) + ")";
}

std::string_view without_version_suffix(std::string_view api_name) {
  const std::size_t v = api_name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == api_name.size()) return api_name;
  for (std::size_t i = v + 2; i < api_name.size(); ++i) {
    if (api_name[i] < '0' || api_name[i] > '9') return api_name;
  }
  return api_name.substr(0, v);
}

void CuptiRecords::add(const CUpti_Activity& record) {
  // Each kind's record is read through its own struct, as CUPTI documents; memcpy keeps the
  // reads free of alignment and aliasing assumptions about the caller's buffer.
  const auto as = [&record]<typename T>(T& out) { std::memcpy(&out, &record, sizeof out); };
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      CUpti_ActivityKernel10 k;
      as(k);
      add_kernel(k);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      CUpti_ActivityMemcpy6 m;
      as(m);
      add_memcpy(m);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      CUpti_ActivityMemset4 m;
      as(m);
      add_memset(m);
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      CUpti_ActivityAPI a;
      as(a);
      add_api(a);
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      CUpti_ActivitySynchronization2 s;
      as(s);
      if (admit(s.start, s.end)) syncs_.push_back(s);
      return;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
      CUpti_ActivityCudaEvent2 e;
      as(e);
      add_cuda_event(e);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      CUpti_ActivityMemory4 m;
      as(m);
      add_memory(m);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      CUpti_ActivityExternalCorrelation c;
      as(c);
      // The innermost range's handle, pushed while the call ran; the first one kept.
      const std::uint32_t correlation = c.correlationId;  // packed fields: copied, not bound
      const std::uint64_t external = c.externalId;
      activity_.add_external_id(correlation, external);
      return;
    }
    default:
      ++skipped_;
      return;
  }
}

bool CuptiRecords::admit(std::uint64_t start, std::uint64_t end) {
  if (start == 0 || end == 0 || end < start) {
    ++incomplete_;
    return false;
  }
  if (start < context_.window_start || (context_.window_end != 0 && start > context_.window_end)) {
    ++outside_window_;
    return false;
  }
  return true;
}

template <typename Record>
GpuRecord CuptiRecords::gpu_work(EventKind kind, std::string name, const Record& r) {
  GpuRecord p;
  p.kind = kind;
  p.name = std::move(name);
  p.start_ns = ns(r.start);
  p.end_ns = ns(r.end);
  p.device = r.deviceId;
  p.context = r.contextId;
  p.stream = r.streamId;
  p.correlation = r.correlationId;
  p.gpu_side = true;
  p.gpu.device = static_cast<std::int32_t>(r.deviceId);
  p.gpu.stream = r.streamId;
  p.gpu.correlation = r.correlationId;
  return p;
}

void CuptiRecords::add_kernel(const CUpti_ActivityKernel10& k) {
  if (!admit(k.start, k.end)) return;
  GpuRecord p = gpu_work(EventKind::kKernel, demangled(k.name), k);
  p.gpu.grid[0] = k.gridX;
  p.gpu.grid[1] = k.gridY;
  p.gpu.grid[2] = k.gridZ;
  p.gpu.block[0] = k.blockX;
  p.gpu.block[1] = k.blockY;
  p.gpu.block[2] = k.blockZ;
  p.gpu.registers_per_thread = k.registersPerThread;
  p.gpu.shared_memory = static_cast<std::int64_t>(k.staticSharedMemory) + k.dynamicSharedMemory;
  const auto sms = context_.sm_count.find(k.deviceId);
  p.other_args = object_text([&](internal::JsonWriter& w) {
    w.key("context");
    w.integer(k.contextId);
    if (sms != context_.sm_count.end() && sms->second > 0) {
      // Kineto's: the grid's blocks spread over the SMs, and their warps.
      const double blocks = static_cast<double>(k.gridX) * k.gridY * k.gridZ;
      const double threads = static_cast<double>(k.blockX) * k.blockY * k.blockZ;
      w.key("blocks per SM");
      w.number(blocks / sms->second);
      w.key("warps per SM");
      w.number(blocks * threads / 32.0 / sms->second);
    }
  });
  activity_.add(std::move(p));
}

void CuptiRecords::add_memcpy(const CUpti_ActivityMemcpy6& m) {
  if (!admit(m.start, m.end)) return;
  add_transfer(gpu_work(EventKind::kMemcpy, memcpy_name(m.copyKind, m.srcKind, m.dstKind), m),
               m.bytes);
}

void CuptiRecords::add_memset(const CUpti_ActivityMemset4& m) {
  if (!admit(m.start, m.end)) return;
  add_transfer(gpu_work(EventKind::kMemset, memset_name(m.memoryKind), m), m.bytes);
}

void CuptiRecords::add_transfer(GpuRecord p, std::uint64_t bytes) {
  p.gpu.bytes = static_cast<std::int64_t>(bytes);
  p.other_args = object_text([&](internal::JsonWriter& w) {
    w.key("context");
    w.integer(p.context);
    w.key("memory bandwidth (GB/s)");
    w.number(gbps(bytes, p.end_ns - p.start_ns));
  });
  activity_.add(std::move(p));
}

void CuptiRecords::add_api(const CUpti_ActivityAPI& a) {
  if (a.kind == CUPTI_ACTIVITY_KIND_DRIVER &&
      std::find(std::begin(kDriverLaunches), std::end(kDriverLaunches), a.cbid) ==
          std::end(kDriverLaunches)) {
    ++skipped_;
    return;
  }
  if (!admit(a.start, a.end)) return;
  GpuRecord p;
  p.kind = a.kind == CUPTI_ACTIVITY_KIND_DRIVER ? EventKind::kDriver : EventKind::kRuntime;
  p.name = context_.api_name ? context_.api_name(a.kind, a.cbid) : std::string();
  if (p.name.empty()) p.name = "cbid " + std::to_string(a.cbid);
  p.start_ns = ns(a.start);
  p.end_ns = ns(a.end);
  p.thread_id = a.threadId;
  p.correlation = a.correlationId;
  p.gpu.correlation = a.correlationId;
  p.other_args = object_text([&](internal::JsonWriter& w) {
    w.key("cbid");
    w.integer(a.cbid);
  });
  activity_.add(std::move(p));
}

namespace {

bool is_event_sync(CUpti_ActivitySynchronizationType type) {
  return type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
         type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
}

static_assert(CUPTI_SYNCHRONIZATION_INVALID_VALUE == GpuRecord::kNoStream &&
              CUPTI_INVALID_STREAM_ID == GpuRecord::kNoStream);

// A stream id as Kineto writes it in args: CUPTI's "none" (0xFFFFFFFF) read as an int32, -1.
std::int64_t kineto_stream(std::uint32_t stream) { return static_cast<std::int32_t>(stream); }

}  // namespace

void CuptiRecords::add_syncs() {
  // The event records by their sync id, and by (context, event) in correlation order: a
  // program records events at every allocator free, so each sync looks its record up rather
  // than scanning them all.
  std::unordered_map<std::uint64_t, const CUpti_ActivityCudaEvent2*> by_id;
  std::map<std::pair<std::uint32_t, std::uint32_t>,
           std::vector<std::pair<std::uint32_t, const CUpti_ActivityCudaEvent2*>>>
      by_event;
  for (const CUpti_ActivityCudaEvent2& e : cuda_events_) {
    if (e.cudaEventSyncId != 0) by_id.emplace(e.cudaEventSyncId, &e);
    by_event[{e.contextId, e.eventId}].emplace_back(e.correlationId, &e);
  }
  for (auto& [key, records] : by_event) {
    std::sort(records.begin(), records.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  for (const CUpti_ActivitySynchronization2& s : syncs_) {
    GpuRecord p;
    p.kind = EventKind::kOther;
    p.category = "cuda_sync";
    p.name = std::string(sync_name(s.type));
    p.start_ns = ns(s.start);
    p.end_ns = ns(s.end);
    p.stream = s.streamId;
    p.correlation = s.correlationId;
    p.gpu_side = true;
    p.gpu.correlation = s.correlationId;
    if (s.streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) p.gpu.stream = s.streamId;
    // What an event sync waits on, as Kineto finds it: the stream and call (correlation) of
    // the latest cudaEventRecord of that event before the sync; CUPTI's cudaEventSyncId names
    // that record outright where it is set. -1 when the record was not seen.
    std::int64_t wait_stream = -1;
    std::int64_t wait_correlation = -1;
    if (is_event_sync(s.type)) {
      const bool by_sync_id =
          s.cudaEventSyncId != 0 && s.cudaEventSyncId != CUPTI_SYNCHRONIZATION_INVALID_VALUE;
      const CUpti_ActivityCudaEvent2* best = nullptr;
      if (by_sync_id) {
        const auto it = by_id.find(s.cudaEventSyncId);
        if (it != by_id.end()) best = it->second;
      } else if (const auto it = by_event.find({s.contextId, s.cudaEventId});
                 it != by_event.end()) {
        const auto& records = it->second;
        const auto after = std::lower_bound(
            records.begin(), records.end(), s.correlationId,
            [](const auto& r, std::uint32_t correlation) { return r.first < correlation; });
        if (after != records.begin()) best = std::prev(after)->second;
      }
      if (best != nullptr) {
        wait_stream = kineto_stream(best->streamId);
        wait_correlation = best->correlationId;
      }
    }
    // Kineto's args (CudaSyncActivity::metadataJson); "device", "stream" and "correlation"
    // come from the record's GpuInfo, but a sync on no stream says "stream": -1 as Kineto's.
    p.other_args = object_text([&](internal::JsonWriter& w) {
      w.key("cuda_sync_kind");
      w.string(sync_name(s.type));
      if (is_event_sync(s.type)) {
        w.key("wait_on_stream");
        w.integer(wait_stream);
        w.key("wait_on_cuda_event_record_corr_id");
        w.integer(wait_correlation);
        w.key("wait_on_cuda_event_id");
        w.integer(s.cudaEventId);
      }
      if (s.streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
        w.key("stream");
        w.integer(-1);
      }
      w.key("context");
      w.integer(s.contextId);
    });
    p.context = s.contextId;
    p.device_known = false;  // the context's, known from the other records at emit()
    activity_.add(std::move(p));
  }
  syncs_.clear();
}

void CuptiRecords::add_cuda_event(const CUpti_ActivityCudaEvent2& e) {
  cuda_events_.push_back(e);
  // Kineto lays a recorded event out as a 1 ns "cudaEvent" at its device time, on its stream;
  // CUPTI gives that time only when asked (cuptiActivityEnableCudaEventDeviceTimestamps), and
  // an event without one has no place on the timeline: it only answers syncs.
  if (e.deviceTimestamp == 0) return;
  GpuRecord p;
  p.kind = EventKind::kOther;
  p.category = "cuda_event";
  p.name = "cudaEvent";
  p.start_ns = ns(e.deviceTimestamp);
  p.end_ns = p.start_ns + 1;
  p.device = e.deviceId;
  p.context = e.contextId;
  p.stream = e.streamId;
  p.correlation = e.correlationId;
  p.gpu_side = true;
  p.gpu.device = static_cast<std::int32_t>(e.deviceId);
  p.gpu.correlation = e.correlationId;
  if (e.streamId != CUPTI_INVALID_STREAM_ID) p.gpu.stream = e.streamId;
  p.other_args = object_text([&](internal::JsonWriter& w) {
    w.key("event_id");
    w.integer(e.eventId);
    if (e.streamId == CUPTI_INVALID_STREAM_ID) {
      w.key("stream");
      w.integer(-1);
    }
    w.key("context");
    w.integer(e.contextId);
  });
  activity_.add(std::move(p));
}

void CuptiRecords::add_memory(const CUpti_ActivityMemory4& m) {
  if (!admit(m.timestamp, m.timestamp)) return;
  GpuRecord p;
  p.kind = EventKind::kMemory;
  p.name = "[memory]";
  p.start_ns = p.end_ns = ns(m.timestamp);
  p.device = m.deviceId;
  p.correlation = m.correlationId;
  const bool release = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  p.memory.address = m.address;
  p.memory.bytes =
      release ? -static_cast<std::int64_t>(m.bytes) : static_cast<std::int64_t>(m.bytes);
  p.memory.device = {DeviceType::kCUDA, static_cast<std::int8_t>(m.deviceId)};
  p.memory.action = release ? MemoryAction::kFree : MemoryAction::kAllocate;
  activity_.add(std::move(p));
}

void CuptiRecords::emit(ProfilerResult::Builder& builder) {
  add_syncs();
  activity_.emit(builder, context_.offset_ns, context_.process_name);
}

}  // namespace opscope::backend

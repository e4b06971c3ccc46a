#include "backend/gpu_activity.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace opscope::backend {

ProcessInfo gpu_process(std::int32_t device, const std::string& program_name) {
  return {device, program_name, "GPU " + std::to_string(device),
          0x1000000 + static_cast<std::int64_t>(device)};
}

void GpuActivity::emit(ProfilerResult::Builder& builder, std::int64_t offset_ns,
                       const std::string& process_name) {
  // Contexts' devices, for syncs (whose records name the context only).
  std::map<std::uint32_t, std::uint32_t> device_of_context;
  // The calls by correlation: flows start there, allocations happen on their thread.
  std::unordered_map<std::uint32_t, const GpuRecord*> call_of;
  std::set<std::uint32_t> devices;
  for (const GpuRecord& p : records_) {
    if (p.kind == EventKind::kRuntime || p.kind == EventKind::kDriver) {
      call_of.emplace(p.correlation, &p);
    } else if (p.gpu_side && p.device_known) {
      devices.insert(p.device);
      device_of_context.emplace(p.context, p.device);
    }
  }
  for (GpuRecord& p : records_) {
    if (!p.device_known) {
      const auto it = device_of_context.find(p.context);
      p.device = it != device_of_context.end() ? it->second : 0;
      p.gpu.device = static_cast<std::int32_t>(p.device);
      p.device_known = true;
      devices.insert(p.device);
    }
  }
  for (const std::uint32_t d : devices) {
    builder.add_process(gpu_process(static_cast<std::int32_t>(d), process_name));
  }

  std::map<std::pair<std::uint32_t, std::uint32_t>, std::int32_t> stream_thread;
  std::unordered_map<std::uint64_t, std::int32_t> cpu_thread;
  const auto thread_of_stream = [&](std::uint32_t device, std::uint32_t stream) {
    auto [it, added] = stream_thread.try_emplace({device, stream}, 0);
    if (added) {
      ThreadInfo t;
      t.pid = device;
      t.device = static_cast<std::int32_t>(device);
      if (stream == GpuRecord::kNoStream) {
        // Kineto's thread -1 (a tid of all ones, which the Chrome trace writes as -1), on no
        // stream: the analysis counts no stream for it.
        t.tid = static_cast<std::uint64_t>(std::int64_t{-1});
        t.name = "Device " + std::to_string(device);
      } else {
        t.tid = stream;
        t.name = "stream " + std::to_string(stream);
        t.stream = stream;
      }
      it->second = builder.add_thread(std::move(t));
    }
    return it->second;
  };
  const auto thread_of_call = [&](std::uint64_t tid) {
    auto [it, added] = cpu_thread.try_emplace(tid, 0);
    if (added) {
      it->second = builder.find_thread(tid);
      if (it->second < 0) it->second = builder.add_thread({tid, {}});
    }
    return it->second;
  };

  for (const GpuRecord& p : records_) {
    Event e;
    e.name = builder.keep(p.name);
    e.kind = p.kind;
    e.start_ns = p.start_ns + offset_ns;
    e.end_ns = std::max(p.end_ns, p.start_ns) + offset_ns;
    if (!p.category.empty()) e.category = builder.category(p.category);
    // The call this record belongs to (same correlation), and the range it ran in.
    const auto call = call_of.find(p.correlation);
    const auto external = external_id_.find(p.correlation);
    EventDetail d;
    if (p.kind == EventKind::kMemory) {
      // An allocation: on the thread of the call that made it.
      e.thread = thread_of_call(call != call_of.end() ? call->second->thread_id : 0);
      d.memory = p.memory;
    } else {
      d.gpu = p.gpu;
      if (external != external_id_.end()) {
        d.gpu.external_id = static_cast<std::int64_t>(external->second);
      }
      if (!p.gpu_side) {
        e.thread = thread_of_call(p.thread_id);
      } else {
        e.thread = thread_of_stream(p.device, p.stream);
        // From the call to what it launched or waited in: kernels, copies, sets, and syncs
        // (Kineto draws those from cudaStreamSynchronize, cudaDeviceSynchronize and
        // cudaStreamWaitEvent, and leaves cudaEventSynchronize's without its start; every
        // sync here gets its whole arrow).
        if (call != call_of.end()) {
          builder.add_flow(
              "ac2g", p.correlation,
              {thread_of_call(call->second->thread_id), call->second->start_ns + offset_ns},
              {e.thread, e.start_ns});
        }
      }
    }
    e.other_args = builder.add_other_args(p.other_args);
    e.detail = builder.add_detail(std::move(d));
    builder.add_event(e);
  }
  records_.clear();
}

void add_timed_ranges(ProfilerResult::Builder& builder, std::vector<TimedRange> ranges,
                      const std::string& process_name) {
  std::map<std::int32_t, std::int32_t> thread_of_device;
  for (const TimedRange& s : ranges) {
    auto [it, added] = thread_of_device.try_emplace(s.device, 0);
    if (!added) continue;
    builder.add_process(gpu_process(s.device, process_name));
    ThreadInfo t;
    t.tid = 0;
    t.name = "CUDA events";
    t.pid = s.device;
    t.device = s.device;
    it->second = builder.add_thread(std::move(t));
  }
  for (const TimedRange& s : ranges) {
    Event e;
    e.name = builder.keep(s.name);
    e.kind = EventKind::kGpuAnnotation;
    e.thread = thread_of_device[s.device];
    e.start_ns = s.start_ns;
    e.end_ns = std::max(s.end_ns, s.start_ns);
    EventDetail d;
    d.gpu.external_id = static_cast<std::int64_t>(s.handle);
    d.gpu.device = s.device;
    e.detail = builder.add_detail(std::move(d));
    builder.add_event(e);
  }
}

}  // namespace opscope::backend

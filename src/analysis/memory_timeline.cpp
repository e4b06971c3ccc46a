// The memory timeline model (memory_timeline.h), after PyTorch's _memory_profiler.py.
#include "analysis/memory_timeline.h"
#include "util/wide_sums.h"

#include <algorithm>
#include <unordered_map>

namespace opscope::analysis {
namespace {

// CUDA's "no index" means the default device, 0; the CPU is one device.
int effective_index(Device d) noexcept {
  if (d.type == DeviceType::kCPU) return 0;
  return d.index < 0 ? 0 : d.index;
}

}  // namespace

std::string_view timeline_action_name(TimelineAction action) noexcept {
  switch (action) {
    case TimelineAction::kPreexisting:
      return "PREEXISTING";
    case TimelineAction::kCreate:
      return "CREATE";
    case TimelineAction::kIncrementVersion:
      return "INCREMENT_VERSION";
    case TimelineAction::kDestroy:
      return "DESTROY";
  }
  return "UNKNOWN";
}

bool device_matches(Device requested, Device event) noexcept {
  return requested.type == event.type && effective_index(requested) == effective_index(event);
}

std::vector<TimelineEntry> memory_timeline(const ProfilerResult& result, Device device) {
  // The reports of this device, in time order across threads. Within a thread the result
  // keeps report order (ids grow); equal times on different threads are ordered by thread,
  // which is as good as any order for reports made at the same nanosecond.
  std::vector<const Event*> reports;
  for (const Event& e : result.events()) {
    if (e.kind != EventKind::kMemory) continue;
    const EventDetail* d = result.detail(e);
    if (d == nullptr || !device_matches(device, d->memory.device)) continue;
    reports.push_back(&e);
  }
  std::stable_sort(reports.begin(), reports.end(), [](const Event* a, const Event* b) {
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    if (a->thread != b->thread) return a->thread < b->thread;
    return a->handle < b->handle;
  });

  struct Live {
    std::int64_t bytes;
    MemoryCategory category;
  };
  std::unordered_map<std::uint64_t, Live> live;  // allocations of the window not freed yet
  live.reserve(reports.size() / 2 + 1);
  std::vector<TimelineEntry> out;
  out.reserve(reports.size() + 8);
  for (const Event* e : reports) {
    const MemoryUse& m = result.detail(*e)->memory;
    const std::int64_t t = e->start_ns;
    const std::int64_t size = m.bytes < 0 ? -m.bytes : m.bytes;
    switch (m.action) {
      case MemoryAction::kAllocate: {
        auto [it, fresh] = live.try_emplace(m.address, Live{size, m.category});
        if (!fresh) {
          // Its free was never reported: close the old allocation so the sizes balance.
          out.push_back({t, TimelineAction::kDestroy, it->second.bytes, it->second.category});
          it->second = {size, m.category};
        }
        out.push_back({t, TimelineAction::kCreate, size, m.category});
        break;
      }
      case MemoryAction::kFree: {
        auto it = live.find(m.address);
        if (it != live.end()) {
          out.push_back({t, TimelineAction::kDestroy, it->second.bytes, it->second.category});
          live.erase(it);
        } else {
          // Allocated before the window: it existed from the start.
          out.push_back({-1, TimelineAction::kPreexisting, size, m.category});
          out.push_back({t, TimelineAction::kDestroy, size, m.category});
        }
        break;
      }
      case MemoryAction::kVersion: {
        auto it = live.find(m.address);
        const MemoryCategory category = it != live.end() ? it->second.category : m.category;
        out.push_back({t, TimelineAction::kIncrementVersion, size, category});
        break;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const TimelineEntry& a, const TimelineEntry& b) {
    if (a.t_ns != b.t_ns) return a.t_ns < b.t_ns;
    return a.action < b.action;
  });
  return out;
}

CoalescedTimeline coalesce_timeline(std::span<const TimelineEntry> timeline) {
  CoalescedTimeline out;
  std::int64_t t_min = -1;
  for (const TimelineEntry& e : timeline) {
    std::int64_t t = e.t_ns;
    if (t != -1) t /= 1000;  // ns -> us, as trace events
    // PyTorch's rule for the time pre-existing memory is shown at, kept as written: the first
    // time seen, or a smaller positive one.
    if (t_min == -1 || (t < t_min && t > 0)) t_min = t;
    if (out.times_us.empty()) {
      out.times_us.push_back(t);
      out.sizes.push_back(CategorySizes{});
    } else if (t != out.times_us.back()) {
      out.times_us.push_back(t);
      out.sizes.push_back(out.sizes.back());
    }
    CategorySizes& s = out.sizes.back();
    const auto index = static_cast<std::size_t>(e.category) + 1;
    switch (e.action) {
      case TimelineAction::kPreexisting:
      case TimelineAction::kCreate:
        // Saturated (util/wide_sums.h): the bytes are the file's, any int64.
        s[index] = internal::saturating_add(s[index], e.bytes);
        break;
      // -bytes for the old version, +bytes for the new; both have the allocation's category.
      case TimelineAction::kIncrementVersion:
        break;
      case TimelineAction::kDestroy:
        s[index] = internal::saturating_sub(s[index], e.bytes);
        break;
    }
  }
  for (std::int64_t& t : out.times_us) {
    if (t < 0) t = t_min;
  }
  return out;
}

}  // namespace opscope::analysis

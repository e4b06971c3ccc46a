#include "session/recorder.h"

#include <unistd.h>

#include <mutex>
#include <unordered_map>

#include "clock/clock.h"
#include "collect/string_table.h"
#include "opscope/error.h"

namespace opscope::session {
namespace {

std::mutex g_claim_mu;
const void* g_owner = nullptr;

std::string_view resolve_name(const internal::Record& r) {
  if (r.flags & internal::kNameInterned) return collect::interned(static_cast<std::uint32_t>(r.name));
  return reinterpret_cast<const CallSite*>(r.name)->name;
}

std::uint64_t handle_of(const internal::Record& r) {
  return (static_cast<std::uint64_t>(r.thread) << 32) | r.id;
}

}  // namespace

void Recorder::claim(const void* owner) {
  std::lock_guard<std::mutex> lock(g_claim_mu);
  if (g_owner != nullptr && g_owner != owner) {
    throw Error(
        "another opscope::Profiler is already started in this process; only one can run at a "
        "time: stop() it first");
  }
  g_owner = owner;
  collect::set_chunk_pooling(true);
}

void Recorder::release(const void* owner) noexcept {
  std::lock_guard<std::mutex> lock(g_claim_mu);
  if (g_owner == owner) {
    g_owner = nullptr;
    collect::set_chunk_pooling(false);
  }
}

void Recorder::start_window(const WindowOptions& options) {
  if (open_) throw Error("internal: a recording window is already open");
  options_ = options;
  open_ = true;
  previous_membership_ = collect::thread_membership();
  start_ticks_ = internal::ticks();
  if (options.record_cpu) {
    epoch_ = collect::begin_epoch(options.epoch);
    collect::set_thread_membership(epoch_);
  }
}

std::shared_ptr<const ProfilerResult> Recorder::stop_window(
    std::vector<std::pair<std::string, std::string>> metadata) {
  if (!open_) throw Error("internal: no recording window is open");
  open_ = false;
  const std::uint64_t stop_ticks = internal::ticks();
  collect::Drained drained;
  if (epoch_ != 0) {
    collect::end_epoch();
    drained = collect::drain(epoch_);
    epoch_ = 0;
  }
  collect::set_thread_membership(previous_membership_);

  // Calibrate over the longest span we have: from library load to now.
  const clock::TickConverter conv = clock::TickConverter::calibrate(clock::process_anchor());

  ProfilerResult::Builder builder;
  builder.set_pid(::getpid());
  builder.set_window(conv.to_wall_ns(start_ticks_), conv.to_wall_ns(stop_ticks));

  std::size_t total = 0;
  std::unordered_map<std::uint16_t, std::int32_t> thread_of_slot;
  for (const auto& t : drained.threads) {
    thread_of_slot[t.slot] = builder.add_thread({t.tid, t.name});
    total += t.records.size();
  }
  builder.reserve(total);

  struct Link {
    std::int64_t sequence_nr;
    std::uint64_t forward_thread_id;
  };
  std::unordered_map<std::uint64_t, Link> links;

  for (const auto& t : drained.threads) {
    const std::int32_t own = thread_of_slot[t.slot];
    for (const internal::Record& r : t.records) {
      const auto kind = static_cast<internal::RecordKind>(r.kind);
      if (kind == internal::RecordKind::kLink) {
        links[handle_of(r)] = {static_cast<std::int64_t>(r.start), r.end};
        continue;
      }
      Event e;
      e.name = resolve_name(r);
      e.site = (r.flags & internal::kNameInterned) ? nullptr
                                                   : reinterpret_cast<const CallSite*>(r.name);
      e.start_ns = conv.to_wall_ns(r.start);
      e.end_ns = kind == internal::RecordKind::kInstant ? e.start_ns : conv.to_wall_ns(r.end);
      e.handle = handle_of(r);
      e.scope = static_cast<RecordScope>(r.scope);
      if (kind == internal::RecordKind::kInstant) {
        e.kind = EventKind::kInstant;
        e.thread = own;
      } else if (r.thread == t.slot) {
        e.kind = EventKind::kRange;
        e.thread = own;
      } else {
        // Ended on another thread: shown on the thread that began it, when that one recorded.
        e.kind = EventKind::kAsyncRange;
        auto it = thread_of_slot.find(r.thread);
        e.thread = it != thread_of_slot.end() ? it->second : own;
      }
      builder.add_event(e);
    }
  }
  if (!links.empty()) {
    builder.apply_links([&](Event& e) {
      auto it = links.find(e.handle);
      if (it != links.end()) {
        e.sequence_nr = it->second.sequence_nr;
        e.forward_thread_id = it->second.forward_thread_id;
      }
    });
  }

  for (auto& [key, value] : metadata) builder.add_metadata(std::move(key), std::move(value));
  SessionStats& stats = builder.stats();
  stats.events_dropped = drained.dropped;
  stats.buffer_bytes = drained.buffer_bytes;
  stats.buffer_limit_bytes = options_.epoch.buffer_limit_bytes;
  stats.not_recorded = options_.not_recorded;
  return builder.finish();
}

}  // namespace opscope::session

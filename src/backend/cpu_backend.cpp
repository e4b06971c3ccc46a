#include "backend/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/registry.h"
#include "collect/string_table.h"
#include "record/call_sites.h"
#include "record/memory_record.h"
#include "record/stack_capture.h"
#include "record/value_codec.h"

namespace opscope::backend {
namespace {

// A record's name word: a `const CallSite*`, or an interned id when `interned`.
std::string_view resolve_name(std::uintptr_t name, bool interned, const RecordNames* names) {
  if (names != nullptr) {
    return interned ? names->interned(static_cast<std::uint32_t>(name)) : names->site_at(name);
  }
  if (interned) return collect::interned(static_cast<std::uint32_t>(name));
  return reinterpret_cast<const CallSite*>(name)->name;
}

// resolve_name for every event of a window, which has few distinct names: a call site's
// name costs a strlen and an interned one a shared lock, so the last name seen in each of 1024
// slots is kept (a direct-mapped cache keyed by the record's name word and flag).
class NameCache {
 public:
  explicit NameCache(const RecordNames* names) : names_(names) {}

  std::string_view operator()(std::uintptr_t name, bool interned) {
    Slot& slot = slots_[(name ^ (name >> 10) ^ (interned ? 0x155 : 0)) % slots_.size()];
    if (!slot.used || slot.name != name || slot.interned != interned) {
      slot = {name, resolve_name(name, interned, names_), interned, true};
    }
    return slot.text;
  }

 private:
  struct Slot {
    std::uintptr_t name = 0;
    std::string_view text;
    bool interned = false;
    bool used = false;
  };
  std::array<Slot, 1024> slots_{};
  const RecordNames* names_;
};

// Whether tick `t` is before `bound` (0: no bound). Ticks are compared as a difference, so
// that a counter that wrapped still orders.
bool before(std::uint64_t t, std::uint64_t bound) {
  return bound != 0 && static_cast<std::int64_t>(t - bound) < 0;
}

std::uint64_t handle_of(const internal::Record& r) {
  return (static_cast<std::uint64_t>(r.thread) << 32) | r.id;
}

struct WordsHash {
  std::size_t operator()(const std::vector<std::uint64_t>& v) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint64_t w : v) h = (h ^ w) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

// Lens side records of one window, joined to their ranges by handle once all are read.
class DetailTable {
 public:
  DetailTable(ProfilerResult::Builder& builder, const RecordNames* names)
      : builder_(builder), names_(names) {}

  EventDetail& of(std::uint64_t handle) { return pending_[handle]; }

  void set_inputs(std::uint64_t handle, std::span<const std::byte> encoded) {
    EventDetail& d = of(handle);
    d.inputs = record::decode_inputs(encoded);
    d.has_inputs = true;
  }

  std::int32_t stack(std::span<const std::uint64_t> words) {
    std::vector<std::uint64_t> key(words.begin(), words.end());
    auto [it, added] = stack_ids_.try_emplace(std::move(key), 0);
    if (added) {
      std::vector<StackFrame> frames;
      frames.reserve(words.size());
      for (std::uint64_t w : words) {
        if (w & record::kLabelFrameBit) {
          const auto id = static_cast<std::uint32_t>(w);
          frames.push_back({0, names_ != nullptr ? names_->interned(id) : collect::interned(id)});
        } else if (names_ != nullptr) {
          // Another process's address: its label, not this process's symbol for it.
          char text[24];
          std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(w));
          frames.push_back({0, builder_.keep(text)});
        } else {
          frames.push_back({w, {}});
        }
      }
      it->second = builder_.add_stack(std::move(frames));
    }
    return it->second;
  }

  // Hands each event its detail, by handle.
  void attach() {
    if (pending_.empty()) return;
    builder_.apply_links([&](Event& e) {
      if (e.kind == EventKind::kMemory) return;
      auto it = pending_.find(e.handle);
      if (it != pending_.end()) e.detail = builder_.add_detail(std::move(it->second));
    });
  }

 private:
  ProfilerResult::Builder& builder_;
  const RecordNames* names_;
  std::unordered_map<std::uint64_t, EventDetail> pending_;
  std::unordered_map<std::vector<std::uint64_t>, std::int32_t, WordsHash> stack_ids_;
};

}  // namespace

std::uint32_t lens_bits(const LensSet& l) {
  std::uint32_t bits = 0;
  if (l.record_shapes) bits |= internal::kLensShapes;
  if (l.profile_memory) bits |= internal::kLensMemory;
  if (l.with_stack) bits |= internal::kLensStack;
  if (l.with_flops) bits |= internal::kLensFlops;
  if (l.with_modules) bits |= internal::kLensModules;
  return bits;
}

LensSet lenses_of_bits(std::uint32_t bits) {
  LensSet l;
  l.record_shapes = (bits & internal::kLensShapes) != 0;
  l.profile_memory = (bits & internal::kLensMemory) != 0;
  l.with_stack = (bits & internal::kLensStack) != 0;
  l.with_flops = (bits & internal::kLensFlops) != 0;
  l.with_modules = (bits & internal::kLensModules) != 0;
  return l;
}

CpuBackend::CpuBackend(const collect::EpochOptions& epoch, const LensSet& lenses)
    : epoch_options_(epoch) {
  epoch_options_.lenses = lens_bits(lenses);
}

void CpuBackend::start() {
  previous_membership_ = collect::thread_membership();
  epoch_ = collect::begin_epoch(epoch_options_);
  collect::set_thread_membership(epoch_);
}

void CpuBackend::stop() {
  if (epoch_ == 0) return;
  collect::end_epoch();
  drained_ = collect::drain(epoch_);
  collect::resume_ring();  // a flight recorder the window paused records again
  epoch_ = 0;
  collect::set_thread_membership(previous_membership_);
}

DecodedCounts decode_records(std::span<const collect::ThreadRecords> threads,
                             ProfilerResult::Builder& builder, const clock::TickConverter& conv,
                             const DecodeOptions& options) {
  DecodedCounts counts;
  std::size_t total = 0;
  std::unordered_map<std::uint16_t, std::int32_t> thread_of_slot;
  for (const auto& t : threads) {
    thread_of_slot[t.slot] = builder.add_thread({t.tid, t.name});
    total += t.size();
  }
  builder.reserve(total);

  struct Link {
    std::int64_t sequence_nr;
    std::uint64_t forward_thread_id;
  };
  std::unordered_map<std::uint64_t, Link> links;
  DetailTable details(builder, options.names);
  // 32 KiB: not on the caller's stack.
  const auto names = std::make_unique<NameCache>(options.names);
  // Taken after the drain: every site index the window's compact ranges hold is in it.
  const std::vector<const CallSite*> sites = record::call_sites();
  std::uint64_t ranges_ended = 0;  // ranges of the window in its records, wherever they ended

  for (const auto& t : threads) {
    const std::int32_t own = thread_of_slot[t.slot];
    // A thread appends a range when it ends and a memory report when it is made, so the
    // buffer's order says which ranges a report came after. The counter's reads do not always
    // agree to the nanosecond (a report read in the same tick as the end of the range before
    // it, rdtsc running ahead out of order), and the Builder's nesting goes by time alone:
    // times that contradict the order are nudged to agree with it, so a report is owned by
    // the range that was open when it was made.
    std::int64_t memory_not_before_ns = std::numeric_limits<std::int64_t>::min();
    std::int64_t last_memory_ns = std::numeric_limits<std::int64_t>::min();
    // A range that began and ended on this thread; its name resolved, its handle set.
    const auto add_own_range = [&](Event& e) {
      e.kind = EventKind::kRange;
      e.thread = own;
      // A range that was open at a report made before it ended does not end before it.
      if (e.start_ns <= last_memory_ns) e.end_ns = std::max(e.end_ns, last_memory_ns);
      memory_not_before_ns = std::max(memory_not_before_ns, e.end_ns + 1);
      ++ranges_ended;
      builder.add_event(e);
    };
    for (const collect::ChunkSlots& chunk : t.chunks) {
      const std::span<const internal::Slot> slots = chunk.slots;
      for (std::size_t i = 0; i < slots.size();) {
        const internal::Slot& first = slots[i];
        if (internal::kind_of(first) == internal::RecordKind::kCompactRange) {
          ++i;
          const std::uint64_t start = chunk.base_ticks + (first.word[0] & 0xFFFFFFFFu);
          const std::uint64_t end = start + (first.word[0] >> 32);
          if (before(end, options.min_end_ticks)) {
            ++counts.left_out;
            continue;
          }
          const auto tag = static_cast<std::uint32_t>(first.word[1] >> 32);
          const std::uint32_t index = tag & (internal::kCompactNameLimit - 1);
          Event e;
          if (tag & internal::kCompactInterned) {
            e.name = (*names)(index, true);
          } else {
            if (options.names != nullptr) {
              e.name = options.names->site(index);
            } else {
              e.site = index < sites.size() ? sites[index] : nullptr;
              e.name = e.site != nullptr ? (*names)(reinterpret_cast<std::uintptr_t>(e.site), false)
                                         : std::string_view("<unknown call site>");
            }
          }
          e.start_ns = conv.to_wall_ns(start);
          e.end_ns = conv.to_wall_ns(end);
          e.handle = (static_cast<std::uint64_t>(t.slot) << 32) |
                     static_cast<std::uint32_t>(first.word[1]);
          e.scope = static_cast<RecordScope>(tag >> 28);
          add_own_range(e);
          continue;
        }
        if (slots.size() - i < internal::kRecordSlots) break;  // cannot happen: published whole
        internal::Record r;
        std::memcpy(&r, &first, sizeof r);
        i += internal::kRecordSlots;
        const auto kind = static_cast<internal::RecordKind>(r.kind);
        if (kind == internal::RecordKind::kLink) {
          links[handle_of(r)] = {static_cast<std::int64_t>(r.start), r.end};
          continue;
        }
        if (kind == internal::RecordKind::kFlops) {
          details.of(handle_of(r)).flops = static_cast<std::int64_t>(r.start);
          continue;
        }
        if (kind == internal::RecordKind::kInputsInline) {
          std::byte bytes[2 * sizeof(std::uint64_t)];
          std::memcpy(bytes, &r.start, sizeof r.start);
          std::memcpy(bytes + sizeof r.start, &r.end, sizeof r.end);
          details.set_inputs(handle_of(r), std::span<const std::byte>(
                                               bytes, std::min<std::size_t>(r.name, sizeof bytes)));
          continue;
        }
        if (kind == internal::RecordKind::kModule) {
          details.of(handle_of(r)).module_path =
              options.names != nullptr ? options.names->interned(static_cast<std::uint32_t>(r.name))
                                       : collect::interned(static_cast<std::uint32_t>(r.name));
          continue;
        }
        if (kind == internal::RecordKind::kInputs || kind == internal::RecordKind::kStack ||
            kind == internal::RecordKind::kMemory) {
          const std::size_t n = internal::payload_slots(r.end);
          if (slots.size() - i < n) break;  // cannot happen: blobs are published whole
          const auto* payload = reinterpret_cast<const std::byte*>(&slots[i]);
          i += n;
          if (kind == internal::RecordKind::kInputs) {
            details.set_inputs(handle_of(r), std::span<const std::byte>(payload, r.end));
          } else if (kind == internal::RecordKind::kStack) {
            details.of(handle_of(r)).stack = details.stack(std::span<const std::uint64_t>(
                reinterpret_cast<const std::uint64_t*>(payload), r.end / sizeof(std::uint64_t)));
          } else {
            if (before(r.start, options.min_end_ticks)) {
              ++counts.left_out;
              continue;
            }
            record::MemoryPayload m;
            if (r.end < sizeof m) continue;  // a damaged blob (a crash dump's)
            std::memcpy(&m, payload, sizeof m);
            EventDetail d;
            d.memory = {r.name,
                        m.bytes,
                        m.total_allocated,
                        m.total_reserved,
                        {static_cast<DeviceType>(m.device_type), m.device_index},
                        static_cast<MemoryCategory>(r.scope),
                        static_cast<MemoryAction>(r.flags)};
            Event e;
            e.name = "[memory]";
            // After every range that ended before it (at least 1 ns after).
            e.start_ns = e.end_ns = std::max(conv.to_wall_ns(r.start), memory_not_before_ns);
            last_memory_ns = e.start_ns;
            e.handle = handle_of(r);
            e.kind = EventKind::kMemory;
            e.thread = own;
            e.detail = builder.add_detail(std::move(d));
            builder.add_event(e);
          }
          continue;
        }
        if (before(kind == internal::RecordKind::kInstant ? r.start : r.end,
                   options.min_end_ticks)) {
          ++counts.left_out;
          continue;
        }
        const bool interned = (r.flags & internal::kNameInterned) != 0;
        Event e;
        e.name = (*names)(r.name, interned);
        e.site = interned || options.names != nullptr ? nullptr
                                                      : reinterpret_cast<const CallSite*>(r.name);
        e.start_ns = conv.to_wall_ns(r.start);
        e.end_ns = kind == internal::RecordKind::kInstant ? e.start_ns : conv.to_wall_ns(r.end);
        e.handle = handle_of(r);
        e.scope = static_cast<RecordScope>(r.scope);
        if (kind == internal::RecordKind::kInstant) {
          e.kind = EventKind::kInstant;
          e.thread = own;
        } else if (r.thread == t.slot) {
          add_own_range(e);
          continue;
        } else {
          // Ended on another thread: shown on the thread that began it, which joins the
          // result if it recorded nothing itself.
          e.kind = EventKind::kAsyncRange;
          auto it = thread_of_slot.find(r.thread);
          if (it == thread_of_slot.end()) {
            if (auto begun = collect::thread_of_slot(r.thread)) {
              const std::int32_t index = builder.add_thread({begun->tid, std::move(begun->name)});
              it = thread_of_slot.emplace(r.thread, index).first;
            }
          }
          e.thread = it != thread_of_slot.end() ? it->second : own;
          e.end_thread = own;
          ++ranges_ended;
        }
        builder.add_event(e);
      }
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

  details.attach();
  counts.ranges_ended = ranges_ended;
  return counts;
}

void CpuBackend::collect(ProfilerResult::Builder& builder, const clock::TickConverter& conv) {
  const collect::Drained drained = std::move(drained_);
  drained_ = {};
  const DecodedCounts counts = decode_records(drained.threads, builder, conv);
  SessionStats& stats = builder.stats();
  stats.events_dropped = drained.dropped;
  const std::uint64_t accounted = counts.ranges_ended + drained.range_ends_dropped;
  stats.ranges_open_at_stop =
      drained.ranges_begun > accounted ? drained.ranges_begun - accounted : 0;
  stats.buffer_bytes = drained.buffer_bytes;
}

const BackendEntry& cpu_backend_entry() {
  static constexpr BackendEntry kEntry{
      .name = "cpu",
      .activity = ActivityType::kCPU,
      .unavailable_reason = [] { return std::string(); },
      .make = [](const WindowRequest& request) -> std::unique_ptr<ActivityBackend> {
        return std::make_unique<CpuBackend>(request.epoch, request.lenses);
      },
  };
  return kEntry;
}

}  // namespace opscope::backend

#include "profiler/flight_result.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "json/json_writer.h"

namespace opscope::flight {
namespace {

std::string describe_dump(const DumpFigures& f, std::int64_t first_ns, std::int64_t dump_ns,
                          std::uint64_t left_out, std::uint64_t open_ranges,
                          const clock::TickConverter& conv) {
  const collect::RingStats& s = f.ring;
  internal::JsonWriter w;
  w.begin_object();
  w.key("trigger");
  w.string(f.trigger);
  if (f.signal) {
    w.key("signal");
    w.integer(*f.signal);
  }
  w.key("keepSeconds");
  w.number(f.keep_seconds);
  w.key("maxBytes");
  w.uinteger(s.capacity_bytes);
  w.key("bytesUsed");
  w.uinteger(s.used_bytes);
  w.key("spanKeptNs");
  w.begin_array();
  w.integer(first_ns);
  w.integer(dump_ns);
  w.end_array();
  w.key("chunksOverwritten");
  w.uinteger(s.chunks_overwritten);
  w.key("recordsOverwritten");
  w.uinteger(s.records_overwritten);
  w.key("recordsDropped");
  w.uinteger(s.dropped);
  w.key("recordsOlderThanKeep");
  w.uinteger(left_out);
  w.key("openRanges");
  w.uinteger(open_ranges);
  w.key("pausedNs");
  w.begin_array();
  for (const auto& [from, to] : s.paused) {
    w.begin_array();
    w.integer(conv.to_wall_ns(from));
    w.integer(to == 0 ? dump_ns : conv.to_wall_ns(to));
    w.end_array();
  }
  w.end_array();
  if (f.names_written) {
    w.key("namesWritten");
    w.boolean(*f.names_written);
  }
  w.end_object();
  return w.str();
}

}  // namespace

DumpResult build_dump_result(std::span<const collect::ThreadRecords> threads,
                             std::span<const OpenEntry> open, const clock::TickConverter& conv,
                             std::uint64_t dump_ticks, std::int64_t pid, const DumpFigures& figures,
                             const backend::RecordNames* names) {
  std::uint64_t min_end = 0;
  if (figures.keep_seconds > 0 && std::isfinite(figures.keep_seconds)) {
    const auto keep_ticks =
        static_cast<std::uint64_t>(figures.keep_seconds * 1e9 / conv.ns_per_tick());
    min_end = dump_ticks > keep_ticks ? dump_ticks - keep_ticks : 1;
  }
  const std::int64_t dump_ns = conv.to_wall_ns(dump_ticks);
  ProfilerResult::Builder builder;
  builder.set_pid(pid);
  const backend::DecodedCounts counts =
      backend::decode_records(threads, builder, conv, {.min_end_ticks = min_end, .names = names});

  std::unordered_set<std::uint64_t> ended;
  std::int64_t first_ns = dump_ns;
  builder.apply_links([&](Event& e) {
    ended.insert(e.handle);
    first_ns = std::min(first_ns, e.start_ns);
  });
  const std::int32_t open_args = builder.add_other_args(R"({"open": true})");
  std::uint64_t open_ranges = 0;
  for (const OpenEntry& o : open) {
    const std::uint64_t handle = (static_cast<std::uint64_t>(o.slot) << 32) | o.range.id;
    if (o.name.empty() || ended.contains(handle)) continue;
    if (static_cast<std::int64_t>(o.range.start - dump_ticks) > 0) continue;  // half written
    std::int32_t thread = builder.find_thread(o.tid);
    if (thread < 0) thread = builder.add_thread({o.tid, o.thread_name});
    Event e;
    e.name = builder.keep(o.name);
    e.site = o.site;
    e.start_ns = conv.to_wall_ns(o.range.start);
    e.end_ns = std::max(dump_ns, e.start_ns);
    e.handle = handle;
    e.scope = static_cast<RecordScope>(o.range.scope);
    e.kind = EventKind::kRange;
    e.thread = thread;
    e.other_args = open_args;
    builder.add_event(e);
    first_ns = std::min(first_ns, e.start_ns);
    ++open_ranges;
  }

  builder.set_window(first_ns, dump_ns);
  builder.set_lenses(backend::lenses_of_bits(figures.ring.lenses));
  builder.add_metadata("flightRecorder", describe_dump(figures, first_ns, dump_ns, counts.left_out,
                                                       open_ranges, conv));
  SessionStats& stats = builder.stats();
  stats.events_dropped = figures.ring.dropped;
  stats.buffer_bytes = figures.ring.used_bytes;
  stats.buffer_limit_bytes = figures.ring.capacity_bytes;
  return {builder.finish(), open_ranges};
}

}  // namespace opscope::flight

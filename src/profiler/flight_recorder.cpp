// The flight recorder: the collector's ring (src/collect), decoded and written on demand.
#include "opscope/flight_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cpu_backend.h"
#include "clock/clock.h"
#include "collect/collector.h"
#include "collect/string_table.h"
#include "json/json_writer.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/internal/clock.h"
#include "profiler/flight_state.h"
#include "record/call_sites.h"

namespace opscope {
namespace {

// What the process's flight recorder is, for the triggers that do not hold it.
struct FlightProcess {
  std::mutex mu;  // guards everything below but `dumping`
  bool running = false;
  FlightRecorderOptions options;
  std::uint64_t dumps = 0;  // numbers the triggered dumps' files
  // The slow-step trigger's state.
  std::uint64_t last_step_ticks = 0;
  std::vector<double> step_ns;  // the last steps, a ring of slow_step_window
  std::size_t step_next = 0;
  std::uint64_t last_slow_dump_ticks = 0;
  // One dump at a time: held while one is written, whose path is `dumping`.
  std::mutex dump_mu;
  std::string dumping;
};

FlightProcess& flight_process() {
  static FlightProcess* p =
      new FlightProcess;  // never destroyed: a trigger may fire while main returns
  return *p;
}

void check_flight_options(const FlightRecorderOptions& o) {
  const auto bad = [](const std::string& what) { throw Error("FlightRecorder", what); };
  if (!(o.keep_seconds > 0) || !std::isfinite(o.keep_seconds)) {
    bad("keep_seconds " + std::to_string(o.keep_seconds) +
        " is not allowed: a number of seconds above 0");
  }
  if (o.max_bytes < collect::kRingMinBytes) {
    bad("max_bytes " + std::to_string(o.max_bytes) + " is not allowed: at least " +
        std::to_string(collect::kRingMinBytes) + " (256 KiB)");
  }
  if (o.slow_step_factor != 0 && !(o.slow_step_factor > 1 && std::isfinite(o.slow_step_factor))) {
    bad("slow_step_factor " + std::to_string(o.slow_step_factor) +
        " is not allowed: 0 (off) or a factor above 1");
  }
  if (o.slow_step_window < 3 || o.slow_step_window > 10'000) {
    bad("slow_step_window " + std::to_string(o.slow_step_window) +
        " is not allowed: between 3 and 10000 steps");
  }
  if (!(o.slow_step_min_interval_seconds >= 0) ||
      !std::isfinite(o.slow_step_min_interval_seconds)) {
    bad("slow_step_min_interval_seconds " + std::to_string(o.slow_step_min_interval_seconds) +
        " is not allowed: seconds, 0 or more");
  }
  if (o.dump_dir.empty()) bad("dump_dir is empty: name a directory (\".\" for the current one)");
}

// The name of an open range's word, or an empty view when the word is no name this process
// gave (an entry read while its thread overwrote it).
std::string_view open_flight_range_name(const internal::OpenRange& r,
                                        const std::unordered_set<const CallSite*>& sites) {
  if (r.flags & internal::kNameInterned)
    return collect::interned(static_cast<std::uint32_t>(r.name));
  const auto* site = reinterpret_cast<const CallSite*>(r.name);
  return sites.contains(site) ? std::string_view(site->name) : std::string_view();
}

// The JSON object of the dump's "flightRecorder" metadata.
std::string describe_flight_dump(const FlightRecorderOptions& o, const collect::RingStats& s,
                                 std::string_view trigger, std::int64_t first_ns,
                                 std::int64_t dump_ns, std::uint64_t left_out,
                                 std::uint64_t open_ranges, const clock::TickConverter& conv) {
  internal::JsonWriter w;
  w.begin_object();
  w.key("trigger");
  w.string(trigger);
  w.key("keepSeconds");
  w.number(o.keep_seconds);
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
  w.end_object();
  return w.str();
}

// Writes the dump to `path` with export_trace(), or with `write` when one is given.
FlightDump write_flight_dump(const FlightRecorderOptions& options, const std::string& path,
                             std::string_view trigger, const flight::DumpWriter* write = nullptr) {
  FlightProcess& p = flight_process();
  std::unique_lock<std::mutex> one(p.dump_mu, std::try_to_lock);
  if (!one.owns_lock()) {
    std::lock_guard<std::mutex> lock(p.mu);
    throw Error("FlightRecorder::dump()",
                "cannot write '" + path + "': a dump to '" + p.dumping +
                    "' is being written, and the flight recorder writes one at a time; "
                    "ask again when it is done");
  }
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.dumping = path;
  }
  // Open ranges first, then the records: a range that ends in between is in both, and its
  // open copy is dropped below; one that ended before is in the records only.
  const std::vector<collect::OpenRangeCopy> open = collect::copy_open_ranges();
  const std::uint64_t dump_ticks = internal::ticks();
  collect::RingCopy ring = collect::copy_ring();
  if (ring.stats.capacity_bytes == 0) {
    throw Error("FlightRecorder::dump()", "no flight recorder records in this process");
  }
  const clock::TickConverter conv = clock::TickConverter::calibrate(clock::process_anchor());
  const auto keep_ticks =
      static_cast<std::uint64_t>(options.keep_seconds * 1e9 / conv.ns_per_tick());
  const std::uint64_t min_end = dump_ticks > keep_ticks ? dump_ticks - keep_ticks : 1;
  const std::int64_t dump_ns = conv.to_wall_ns(dump_ticks);

  ProfilerResult::Builder builder;
  builder.set_pid(::getpid());
  const backend::DecodedCounts counts =
      backend::decode_records(ring.threads, builder, conv, {.min_end_ticks = min_end});

  // Ranges still open, but those whose end the records hold.
  std::unordered_set<std::uint64_t> ended;
  builder.apply_links([&](Event& e) { ended.insert(e.handle); });
  const std::vector<const CallSite*> site_list = record::call_sites();
  const std::unordered_set<const CallSite*> sites(site_list.begin(), site_list.end());
  std::unordered_map<std::uint64_t, std::int32_t> thread_of_tid;
  const std::int32_t open_args = builder.add_other_args(R"({"open": true})");
  std::uint64_t open_ranges = 0;
  std::int64_t first_ns = dump_ns;
  builder.apply_links([&](Event& e) { first_ns = std::min(first_ns, e.start_ns); });
  for (const collect::OpenRangeCopy& o : open) {
    const std::uint64_t handle = (static_cast<std::uint64_t>(o.slot) << 32) | o.range.id;
    if (ended.contains(handle)) continue;
    if (static_cast<std::int64_t>(o.range.start - dump_ticks) > 0) continue;  // half written
    const std::string_view name = open_flight_range_name(o.range, sites);
    if (name.empty()) continue;
    auto it = thread_of_tid.find(o.tid);
    if (it == thread_of_tid.end()) {
      std::int32_t index = builder.find_thread(o.tid);
      if (index < 0) index = builder.add_thread({o.tid, o.thread_name});
      it = thread_of_tid.emplace(o.tid, index).first;
    }
    Event e;
    e.name = name;
    e.site = (o.range.flags & internal::kNameInterned)
                 ? nullptr
                 : reinterpret_cast<const CallSite*>(o.range.name);
    e.start_ns = conv.to_wall_ns(o.range.start);
    e.end_ns = std::max(dump_ns, e.start_ns);
    e.handle = handle;
    e.scope = static_cast<RecordScope>(o.range.scope);
    e.kind = EventKind::kRange;
    e.thread = it->second;
    e.other_args = open_args;
    builder.add_event(e);
    first_ns = std::min(first_ns, e.start_ns);
    ++open_ranges;
  }

  builder.set_window(first_ns, dump_ns);
  builder.set_lenses(backend::lenses_of_bits(ring.stats.lenses));
  builder.add_metadata("flightRecorder",
                       describe_flight_dump(options, ring.stats, trigger, first_ns, dump_ns,
                                            counts.left_out, open_ranges, conv));
  SessionStats& stats = builder.stats();
  stats.events_dropped = ring.stats.dropped;
  stats.buffer_bytes = ring.stats.used_bytes;
  stats.buffer_limit_bytes = ring.stats.capacity_bytes;
  ring = {};  // the copy's memory goes before the trace's is taken
  const std::shared_ptr<const ProfilerResult> result = builder.finish();
  if (write != nullptr) {
    (*write)(*result);
  } else {
    export_trace(*result, path);
  }
  return {path, result->events().size(), open_ranges};
}

}  // namespace

namespace flight {

bool running() noexcept {
  FlightProcess& p = flight_process();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.running;
}

std::optional<FlightRecorderOptions> options() {
  FlightProcess& p = flight_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.running) return std::nullopt;
  return p.options;
}

FlightDump dump_with(const std::string& path, std::string_view trigger, const DumpWriter& write) {
  const std::optional<FlightRecorderOptions> o = options();
  if (!o) {
    throw Error("FlightRecorder::dump()",
                "no flight recorder records in this process (start one with "
                "opscope::FlightRecorder or OPSCOPE_FLIGHT_RECORDER=seconds[,MiB])");
  }
  return write_flight_dump(*o, path, trigger, &write);
}

}  // namespace flight

FlightRecorder::FlightRecorder(const FlightRecorderOptions& options) : options_(options) {
  check_flight_options(options);
  FlightProcess& p = flight_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.running) {
    throw Error("FlightRecorder",
                "a flight recorder is already recording in this process (one at a time; "
                "OPSCOPE_FLIGHT_RECORDER starts one at load)");
  }
  collect::start_ring(
      {.max_bytes = options.max_bytes, .lenses = backend::lens_bits(options.lenses)});
  p.running = true;
  p.options = options;
  p.step_ns.assign(static_cast<std::size_t>(options.slow_step_window), 0);
  p.step_next = 0;
  p.last_step_ticks = 0;
  p.last_slow_dump_ticks = 0;
  if (options.dump_on_crash) {
    try {
      flight::arm_crash_dump(options.dump_dir, options.keep_seconds);
    } catch (...) {
      collect::stop_ring();
      p.running = false;
      throw;
    }
  }
}

FlightRecorder::~FlightRecorder() {
  FlightProcess& p = flight_process();
  std::lock_guard<std::mutex> lock(p.mu);
  if (options_.dump_on_crash) flight::disarm_crash_dump();
  collect::stop_ring();
  p.running = false;
}

FlightDump FlightRecorder::dump(const std::string& path) const {
  return write_flight_dump(options_, path, "dump()");
}

void FlightRecorder::step() {
  if (options_.slow_step_factor == 0) return;
  FlightProcess& p = flight_process();
  const std::uint64_t now = internal::ticks();
  std::string path;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    const std::uint64_t last = p.last_step_ticks;
    p.last_step_ticks = now;
    if (last == 0) return;
    const double ns_per_tick =
        clock::TickConverter::calibrate(clock::process_anchor()).ns_per_tick();
    const double took = static_cast<double>(now - last) * ns_per_tick;
    // The median of the steps before this one (those recorded so far, once half the window).
    std::vector<double> before;
    for (double d : p.step_ns) {
      if (d > 0) before.push_back(d);
    }
    p.step_ns[p.step_next] = took;
    p.step_next = (p.step_next + 1) % p.step_ns.size();
    if (before.size() < std::max<std::size_t>(3, p.step_ns.size() / 2)) return;
    std::nth_element(before.begin(), before.begin() + before.size() / 2, before.end());
    const double median = before[before.size() / 2];
    if (took <= options_.slow_step_factor * median) return;
    const double since_ns = p.last_slow_dump_ticks == 0
                                ? 1e300
                                : static_cast<double>(now - p.last_slow_dump_ticks) * ns_per_tick;
    if (since_ns < options_.slow_step_min_interval_seconds * 1e9) return;
    p.last_slow_dump_ticks = now;
  }
  path = flight_dump_path("slow_step");
  try {
    write_flight_dump(options_, path, "slow step");
  } catch (const Error& e) {
    warn(std::string("flight recorder: the slow step's dump was not written: ") + e.what());
  }
}

bool flight_recorder_running() noexcept { return flight::running(); }

FlightDump dump_flight_recorder(const std::string& path, std::string_view trigger) {
  const std::optional<FlightRecorderOptions> options = flight::options();
  if (!options) {
    throw Error("FlightRecorder::dump()",
                "no flight recorder records in this process (start one with "
                "opscope::FlightRecorder or OPSCOPE_FLIGHT_RECORDER=seconds[,MiB])");
  }
  return write_flight_dump(*options, path, trigger);
}

std::string flight_dump_path(std::string_view trigger) {
  FlightProcess& p = flight_process();
  std::lock_guard<std::mutex> lock(p.mu);
  const std::string dir = p.running ? p.options.dump_dir : std::string(".");
  return dir + "/opscope_flight_" + std::to_string(::getpid()) + "_" + std::string(trigger) + "_" +
         std::to_string(++p.dumps) + ".json";
}

}  // namespace opscope

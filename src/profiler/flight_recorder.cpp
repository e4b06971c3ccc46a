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
#include <unordered_set>
#include <vector>

#include "backend/cpu_backend.h"
#include "clock/clock.h"
#include "collect/collector.h"
#include "collect/string_table.h"
#include "opscope/error.h"
#include "opscope/export.h"
#include "opscope/internal/clock.h"
#include "profiler/flight_result.h"
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
  const std::vector<const CallSite*> site_list = record::call_sites();
  const std::unordered_set<const CallSite*> sites(site_list.begin(), site_list.end());
  std::vector<flight::OpenEntry> entries;
  entries.reserve(open.size());
  for (const collect::OpenRangeCopy& o : open) {
    const bool interned = (o.range.flags & internal::kNameInterned) != 0;
    entries.push_back({o.tid, o.thread_name, o.slot, o.range,
                       open_flight_range_name(o.range, sites),
                       interned ? nullptr : reinterpret_cast<const CallSite*>(o.range.name)});
  }
  flight::DumpFigures figures;
  figures.trigger = trigger;
  figures.keep_seconds = options.keep_seconds;
  figures.ring = std::move(ring.stats);
  flight::DumpResult dumped =
      flight::build_dump_result(ring.threads, entries, conv, dump_ticks, ::getpid(), figures);
  ring = {};
  const std::shared_ptr<const ProfilerResult>& result = dumped.result;
  if (write != nullptr) {
    (*write)(*result);
  } else {
    export_trace(*result, path);
  }
  return {path, result->events().size(), dumped.open_ranges};
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

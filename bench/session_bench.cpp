// A real recorded session, end to end after recording: what stop() costs per event, and how
// fast the first Chrome trace export of the process runs, to a file on disk and to a string.
//
// The session is what programs record: 2 threads at once, ranges nested three deep (a root
// holding 3 ops holding 2 ops each), 200 distinct call-site names, 1 M and 10 M events. Each
// measurement runs in a forked child, so that it is the first stop() and the first export of
// a process that has recorded nothing before (fresh memory, cold caches), as users meet them.
//
// Counters (per size): stop_ns = stop() per event; file_Mev_s and json_Mev_s = first export
// to a file beside this program (on disk, not tmpfs) and first chrome_trace_json(), in
// million events per second; *_growth = per-event cost at 10 M over that at 1 M (1.0 when
// linear). floor_* = the same bytes written without opscope, in a child that recorded the
// same session: the Events' 104 bytes each to fresh memory (floor_stop_ns), and the trace's
// bytes to fresh memory or to a new file (floor_Mev_s). On a VM whose host backs guest memory
// on first touch these floors, not opscope's code, bound the first stop and export.
// OPSCOPE_BENCH_SMOKE=1 (scripts/test: does it run?) leaves out the pauses between children.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "in_fresh_process.h"
#include "opscope/export.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "util/fresh_memory.h"

namespace {

constexpr int kNames = 200;
constexpr int kThreads = 2;

struct Sites {
  std::array<std::string, kNames> names;
  std::array<opscope::CallSite, kNames> sites;
  Sites() {
    for (int i = 0; i < kNames; ++i) {
      names[i] = (i % 2 ? "aten::op_" : "model.layer") + std::to_string(i);
      sites[i] = {names[i].c_str(), "bench", __FILE__, static_cast<std::uint32_t>(i)};
    }
  }
};

const Sites& sites() {
  static const Sites s;
  return s;
}

// One step: a root holding 3 ops holding 2 ops each, 10 ranges, names cycling through the
// 200 sites.
void record_events(std::int64_t events, int offset) {
  const auto& s = sites().sites;
  int n = offset;
  auto site = [&]() -> const opscope::CallSite& { return s[(n++ * 7) % kNames]; };
  for (std::int64_t done = 0; done < events; done += 10) {
    opscope::RecordFunction root(site(), opscope::RecordScope::kUserScope);
    for (int c = 0; c < 3; ++c) {
      opscope::RecordFunction op(site(), opscope::RecordScope::kFunction);
      { opscope::RecordFunction a(site(), opscope::RecordScope::kFunction); }
      { opscope::RecordFunction b(site(), opscope::RecordScope::kFunction); }
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

enum class Export { kFile, kJson, kFloor };

struct Figures {
  double stop_ns = 0;     // per event
  double export_mev = 0;  // million events per second
  std::uint64_t events = 0;
  std::uint64_t output_bytes = 0;  // of the trace
};

// The floor: writing the bytes an operation must produce into memory the process never
// touched, which is what the first stop() (104-byte Events) and the first export (the trace's
// bytes, to a string or to the page cache) cannot avoid. Memory the kernel hands out fresh is
// zeroed, and on a VM also backed by the host on first touch: on the project's VM that costs
// more than opscope's own work. Measured the cheapest way the kernel offers (pages mapped in
// one call, then written), as opscope maps them. The memory is kept, as a result would be.
double touch_fresh_memory_ns(std::uint64_t bytes, std::vector<std::unique_ptr<char[]>>& kept) {
  const auto t0 = std::chrono::steady_clock::now();
  kept.emplace_back(new char[bytes]);
  opscope::util::populate_for_writing(kept.back().get(), bytes);
  std::memset(kept.back().get(), 'x', bytes);
  benchmark::DoNotOptimize(kept.back().get());
  return seconds_since(t0) * 1e9;
}

// The floor of an export to a file: writing the same number of bytes to a new file in the
// same directory, 1 MiB per write() (the page cache's fresh pages are most of the cost).
double write_file_ns(const std::string& path, std::uint64_t bytes) {
  std::vector<char> block(1 << 20, 'x');
  const auto t0 = std::chrono::steady_clock::now();
  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) std::abort();
  std::setvbuf(out, nullptr, _IONBF, 0);
  for (std::uint64_t left = bytes; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
    if (std::fwrite(block.data(), 1, n, out) != n) std::abort();
    left -= n;
  }
  std::fclose(out);
  const double ns = seconds_since(t0) * 1e9;
  std::filesystem::remove(path);
  return ns;
}

Figures measure(std::int64_t events, Export what, const std::string& path) {
  opscope::ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 16ull << 30;
  opscope::Profiler prof(config);
  prof.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(record_events, events / kThreads, t * 13);
  }
  for (auto& t : threads) t.join();
  Figures f;
  if (what == Export::kFloor) {
    // The same steps with the bytes written to fresh memory instead: `path` holds the bytes
    // of the events and of the trace, and the file to write the trace's bytes to (empty: to
    // memory). stop() runs too (untimed), so that the trace's bytes come after as much memory
    // as in the measured child.
    const auto comma = path.find(',');
    const auto comma2 = path.find(',', comma + 1);
    const std::uint64_t trace_bytes = std::stoull(path.substr(comma + 1, comma2 - comma - 1));
    const std::string file = path.substr(comma2 + 1);
    std::vector<std::unique_ptr<char[]>> kept;
    const double events_ns = touch_fresh_memory_ns(std::stoull(path.substr(0, comma)), kept);
    prof.stop();
    f.events = prof.stats().events_recorded;
    const double trace_ns =
        file.empty() ? touch_fresh_memory_ns(trace_bytes, kept) : write_file_ns(file, trace_bytes);
    f.stop_ns = events_ns / static_cast<double>(f.events);
    f.export_mev = static_cast<double>(f.events) / trace_ns * 1e3;
    return f;
  }
  auto t0 = std::chrono::steady_clock::now();
  prof.stop();
  const double stop_s = seconds_since(t0);
  if (prof.stats().events_dropped != 0) std::abort();
  f.events = prof.stats().events_recorded;
  f.stop_ns = stop_s * 1e9 / static_cast<double>(f.events);
  t0 = std::chrono::steady_clock::now();
  std::string json;  // freed after the timing: a caller keeps what it asked for
  if (what == Export::kFile) {
    prof.export_chrome_trace(path);
  } else {
    json = opscope::chrome_trace_json(prof.result());
    f.output_bytes = json.size();
  }
  f.export_mev = static_cast<double>(f.events) / seconds_since(t0) / 1e6;
  if (what == Export::kFile) {
    f.output_bytes = std::filesystem::file_size(path);
    std::filesystem::remove(path);
  }
  return f;
}

Figures in_child(std::int64_t events, Export what, const std::string& path) {
  // Memory the previous child freed goes back to the host a few seconds later (free page
  // reporting); until then the kernel hands it out again cheaply. Each child starts after that,
  // so that none profits from the one before, whichever order they run in. scripts/test's smoke
  // run (OPSCOPE_BENCH_SMOKE set) times nothing, and waits 32 s less.
  static const bool smoke = std::getenv("OPSCOPE_BENCH_SMOKE") != nullptr;
  if (!smoke) std::this_thread::sleep_for(std::chrono::seconds(4));
  const auto got = in_fresh_process([&] { return measure(events, what, path); });
  return got ? *got : Figures{};  // events == 0: the child failed
}

void BM_StopAndFirstExport(benchmark::State& state) {
  const auto what = static_cast<Export>(state.range(0));
  const std::string path =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "session_bench.tmp.json")
          .string();
  Figures small{};
  Figures large{};
  Figures small_floor{};
  Figures large_floor{};
  const auto sizes = [&](const Figures& f) {
    return std::to_string(f.events * sizeof(opscope::Event)) + "," +
           std::to_string(f.output_bytes) + "," + (what == Export::kFile ? path : "");
  };
  for (auto _ : state) {
    small = in_child(1'000'000, what, path);
    large = in_child(10'000'000, what, path);
    small_floor = in_child(1'000'000, Export::kFloor, sizes(small));
    large_floor = in_child(10'000'000, Export::kFloor, sizes(large));
    if (small.events == 0 || large.events == 0 || small_floor.events == 0 ||
        large_floor.events == 0) {
      state.SkipWithError("a measuring child failed");
      return;
    }
  }
  const std::string label = what == Export::kFile ? "file" : "json";
  state.counters["stop_ns_1M"] = small.stop_ns;
  state.counters["stop_ns_10M"] = large.stop_ns;
  state.counters["stop_growth"] = large.stop_ns / small.stop_ns;
  state.counters[label + "_Mev_s_1M"] = small.export_mev;
  state.counters[label + "_Mev_s_10M"] = large.export_mev;
  state.counters[label + "_growth"] = small.export_mev / large.export_mev;
  // The same bytes written to fresh memory (the trace's: to a new file for the file export),
  // in a child that recorded the same session.
  state.counters["floor_stop_ns_1M"] = small_floor.stop_ns;
  state.counters["floor_stop_ns_10M"] = large_floor.stop_ns;
  state.counters["floor_Mev_s_1M"] = small_floor.export_mev;
  state.counters["floor_Mev_s_10M"] = large_floor.export_mev;
  state.counters["bytes_per_event"] =
      static_cast<double>(large.output_bytes) / static_cast<double>(large.events);
}
BENCHMARK(BM_StopAndFirstExport)
    ->Arg(static_cast<int>(Export::kFile))
    ->Arg(static_cast<int>(Export::kJson))
    ->ArgName("json")
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();

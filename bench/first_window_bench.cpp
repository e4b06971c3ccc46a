// The first recording window of a process, in process CPU: what a program that starts its
// first Profiler pays per range, every opscope thread included (the refill thread that maps
// chunks ahead of the recording threads). A fresh process is the only honest place to measure
// a first window, so each repetition forks a child that knows nothing of earlier windows.
//
// The child measures, one after the other, with the same recording threads:
//   floor         two counter reads per iteration (the least a range can cost)
//   first window  ranges under the process's first Profiler
//   next window   ranges under a second Profiler started after the first was stopped
// and reports process CPU time per range for each, plus the ratios to the floor, which are
// what bench/RESULTS.md judges (a ratio inside one child is steadier than any absolute figure
// on a shared machine). idle_pool_mib is the chunk memory the process keeps once no window
// records.
#include <benchmark/benchmark.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "collect/collector.h"
#include "in_fresh_process.h"
#include "opscope/internal/clock.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"

namespace {

constexpr std::int64_t kRangesPerThread = 4'000'000;  // 128 MiB of records per thread

double process_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Runs `body` on `threads` threads at once and returns the process CPU it took per iteration.
template <typename Body>
double cpu_per_iteration(int threads, Body body) {
  const double before = process_cpu_ns();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(body);
  for (auto& t : pool) t.join();
  return (process_cpu_ns() - before) / static_cast<double>(kRangesPerThread * threads);
}

void record_ranges() {
  for (std::int64_t i = 0; i < kRangesPerThread; ++i) {
    OPSCOPE_RECORD_FUNCTION("bench::first_window");
    benchmark::ClobberMemory();
  }
}

double window_cpu_per_range(int threads) {
  opscope::ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 8ull << 30;
  opscope::Profiler prof(config);
  // Measured from before start(): whatever start() prepares counts against the window.
  const double before = process_cpu_ns();
  prof.start();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(record_ranges);
  for (auto& t : pool) t.join();
  const double per_range =
      (process_cpu_ns() - before) / static_cast<double>(kRangesPerThread * threads);
  prof.stop();
  if (prof.stats().events_dropped != 0) std::abort();  // the figure would be wrong
  return per_range;
}

struct ChildFigures {
  double floor_ns;
  double first_ns;
  double next_ns;
  double idle_pool_mib;
};

ChildFigures measure_in_child(int threads) {
  ChildFigures f{};
  f.floor_ns = cpu_per_iteration(threads, [] {
    for (std::int64_t i = 0; i < kRangesPerThread; ++i) {
      benchmark::DoNotOptimize(opscope::internal::ticks());
      benchmark::DoNotOptimize(opscope::internal::ticks());
    }
  });
  f.first_ns = window_cpu_per_range(threads);
  f.next_ns = window_cpu_per_range(threads);
  f.idle_pool_mib = static_cast<double>(opscope::collect::pooled_chunk_bytes()) / (1 << 20);
  return f;
}

void BM_FirstWindowProcessCpu(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ChildFigures f{};
  for (auto _ : state) {
    const auto got = in_fresh_process([threads] { return measure_in_child(threads); });
    if (!got) {
      state.SkipWithError("the measuring child failed");
      return;
    }
    f = *got;
  }
  state.counters["floor_ns"] = f.floor_ns;
  state.counters["first_ns"] = f.first_ns;
  state.counters["next_ns"] = f.next_ns;
  state.counters["first_ratio"] = f.first_ns / f.floor_ns;
  state.counters["next_ratio"] = f.next_ns / f.floor_ns;
  state.counters["idle_pool_mib"] = f.idle_pool_mib;
}
BENCHMARK(BM_FirstWindowProcessCpu)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

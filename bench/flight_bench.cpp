// The flight recorder: what a range costs while it records, beside a warm Profiler window's
// range and the floor of two counter reads, all in one run; the time a dump of a full 64 MiB
// ring takes; and the recorder's CPU while the program records nothing. Figures go to
// bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "opscope/error.h"
#include "opscope/flight_recorder.h"
#include "opscope/internal/clock.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"

namespace {

constexpr std::int64_t kIterations = 4'000'000;

void BM_TwoCounterReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::internal::ticks());
    benchmark::DoNotOptimize(opscope::internal::ticks());
  }
}
BENCHMARK(BM_TwoCounterReads)->ThreadRange(1, 2)->UseRealTime();

// A warm Profiler window, as record_bench's BM_RangeCpuSessionWarm: the window the recorder's
// range is held to.
opscope::Profiler* g_profiler = nullptr;

void start_warm_window(const benchmark::State& state) {
  opscope::ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 8ull << 30;
  auto quiet = opscope::set_warning_handler([](std::string_view) {});
  config.schedule = opscope::schedule({.wait = 0, .warmup = 0, .active = 1});
  opscope::set_warning_handler(std::move(quiet));
  g_profiler = new opscope::Profiler(config);
  g_profiler->start();
  std::vector<std::thread> threads;
  for (int t = 0; t < state.threads(); ++t) {
    threads.emplace_back([] {
      for (std::int64_t i = 0; i < kIterations; ++i) {
        OPSCOPE_RECORD_FUNCTION("bench::warmup");
      }
    });
  }
  for (auto& t : threads) t.join();
  g_profiler->step();
}

void stop_window(const benchmark::State&) {
  g_profiler->stop();
  if (g_profiler->stats().events_dropped != 0) std::abort();  // the figures would be wrong
  delete g_profiler;
  g_profiler = nullptr;
}

void BM_RangeWarmWindow(benchmark::State& state) {
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::range");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeWarmWindow)
    ->Setup(start_warm_window)
    ->Teardown(stop_window)
    ->ThreadRange(1, 2)
    ->UseRealTime()
    ->Iterations(kIterations);

// The same range with the flight recorder on. Its 64 MiB ring is filled once before the
// measured loop, so the loop runs in the steady state: every chunk reused, none fresh.
opscope::FlightRecorder* g_recorder = nullptr;

void start_recorder(const benchmark::State& state) {
  g_recorder = new opscope::FlightRecorder({.max_bytes = 64ull << 20});
  std::vector<std::thread> threads;
  for (int t = 0; t < state.threads(); ++t) {
    threads.emplace_back([] {
      for (std::int64_t i = 0; i < kIterations + kIterations / 4; ++i) {
        OPSCOPE_RECORD_FUNCTION("bench::fill");
      }
    });
  }
  for (auto& t : threads) t.join();
}

void stop_recorder(const benchmark::State&) {
  delete g_recorder;
  g_recorder = nullptr;
}

void BM_RangeFlightRecorder(benchmark::State& state) { BM_RangeWarmWindow(state); }
BENCHMARK(BM_RangeFlightRecorder)
    ->Setup(start_recorder)
    ->Teardown(stop_recorder)
    ->ThreadRange(1, 2)
    ->UseRealTime()
    ->Iterations(kIterations);

// A dump of a full 64 MiB ring (about 4 M ranges, nested two deep on two threads) to a file in
// the temporary directory, while nothing else records.
// OPSCOPE_BENCH_SMOKE (scripts/test's benchmarks stage): a 4 MiB ring, so that the run is brief.
bool smoke() { return std::getenv("OPSCOPE_BENCH_SMOKE") != nullptr; }

void BM_Dump64MiB(benchmark::State& state) {
  const std::uint64_t bytes = smoke() ? 4ull << 20 : 64ull << 20;
  opscope::FlightRecorder recorder({.keep_seconds = 3600, .max_bytes = bytes});
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([bytes] {
      // Two compact ranges of 16 bytes per iteration, 1.5 times what the ring holds.
      const auto iterations = static_cast<std::int64_t>(bytes / 16 / 2 / 2 * 3 / 2);
      for (std::int64_t i = 0; i < iterations; ++i) {
        OPSCOPE_USER_SCOPE("bench::step");
        OPSCOPE_RECORD_FUNCTION("bench::op");
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string path =
      (std::filesystem::temp_directory_path() / "opscope_flight_bench.json").string();
  std::uint64_t events = 0;
  for (auto _ : state) {
    events = recorder.dump(path).events;
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  std::filesystem::remove(path);
}
BENCHMARK(BM_Dump64MiB)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// The recorder's own CPU: the process's CPU time over a second in which the program records
// nothing (a recorder has no thread of its own; this shows it).
void BM_IdleRecorderCpu(benchmark::State& state) {
  opscope::FlightRecorder recorder({.max_bytes = 64ull << 20});
  const auto cpu_ns = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000'000LL +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000LL;
  };
  std::int64_t used = 0;
  for (auto _ : state) {
    const std::int64_t before = cpu_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(smoke() ? 50 : 1000));
    used = cpu_ns() - before;
  }
  state.counters["cpu_us_per_s"] = static_cast<double>(used) / 1000.0 * (smoke() ? 20 : 1);
}
BENCHMARK(BM_IdleRecorderCpu)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

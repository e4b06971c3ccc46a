// The hot path: what a range costs with nothing listening, with a CPU session, and on two
// threads at once; plus the floor it is measured against (two counter reads) and the buffer
// bytes one range takes. Figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "opscope/error.h"
#include "opscope/internal/clock.h"
#include "opscope/legacy.h"
#include "opscope/profiler.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"

namespace {

// The floor: a range cannot cost less than reading the counter at its start and its end.
void BM_TwoCounterReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::internal::ticks());
    benchmark::DoNotOptimize(opscope::internal::ticks());
  }
}
BENCHMARK(BM_TwoCounterReads)->ThreadRange(1, 2)->UseRealTime();

void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EmptyLoop);

void BM_RangeNoSession(benchmark::State& state) {
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::no_session");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeNoSession);

// One profiler for the whole program so that threads of a multi-threaded benchmark share it.
// The buffer limit is large enough that the window never drops, and the window is restarted
// every few million ranges so memory stays bounded.
opscope::Profiler* g_profiler = nullptr;

constexpr std::int64_t kSessionIterations = 4'000'000;

// Setup/Teardown run once per benchmark run (not per thread), outside the timed region.
void start_session(const benchmark::State&) {
  opscope::ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 8ull << 30;
  g_profiler = new opscope::Profiler(config);
  g_profiler->start();
}

// As start_session, but the buffer memory the measured window writes was already faulted in
// by an earlier window of the same profiler: the steady state of a schedule that records
// window after window. The schedule saves every step, so step() rotates the window.
void start_warm_session(const benchmark::State& state) {
  opscope::ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 8ull << 30;
  auto quiet = opscope::set_warning_handler([](std::string_view) {});  // warmup=0 warns
  config.schedule = opscope::schedule({.wait = 0, .warmup = 0, .active = 1});
  opscope::set_warning_handler(std::move(quiet));
  g_profiler = new opscope::Profiler(config);
  g_profiler->start();
  std::vector<std::thread> threads;
  for (int t = 0; t < state.threads(); ++t) {
    threads.emplace_back([] {
      for (std::int64_t i = 0; i < kSessionIterations; ++i) {
        OPSCOPE_RECORD_FUNCTION("bench::warmup");
      }
    });
  }
  for (auto& t : threads) t.join();
  g_profiler->step();
}

void stop_session(const benchmark::State&) {
  g_profiler->stop();
  if (g_profiler->stats().events_dropped != 0) std::abort();  // the figures would be wrong
  delete g_profiler;
  g_profiler = nullptr;
}

// A range with a session recording all threads, in a new Profiler's window. Its chunks come
// from the pool earlier windows of the process filled (kept between Profilers), so only the
// first repetition writes fresh pages: first_window_bench measures a process's first window.
void BM_RangeCpuSession(benchmark::State& state) {
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::session");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeCpuSession)
    ->Setup(start_session)
    ->Teardown(stop_session)
    ->ThreadRange(1, 2)
    ->UseRealTime()
    ->Iterations(kSessionIterations);

// The same range once the profiler's buffer memory is warm (only the Setup differs).
void BM_RangeCpuSessionWarm(benchmark::State& state) { BM_RangeCpuSession(state); }
BENCHMARK(BM_RangeCpuSessionWarm)
    ->Setup(start_warm_session)
    ->Teardown(stop_session)
    ->ThreadRange(1, 2)
    ->UseRealTime()
    ->Iterations(kSessionIterations);

void BM_RangeDynamicName(benchmark::State& state) {
  const std::string name = "bench::dynamic_name_longer_than_sso";
  for (auto _ : state) {
    opscope::RecordFunction rf(name, opscope::RecordScope::kUserScope);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeDynamicName)->Setup(start_session)->Teardown(stop_session)->Iterations(2'000'000);

void BM_RangeWithObserver(benchmark::State& state) {
  const auto handle = opscope::add_global_callback(opscope::RecordFunctionCallback(
      [](const opscope::RecordFunction&) -> std::unique_ptr<opscope::ObserverContext> {
        return nullptr;
      }));
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::observed");
    benchmark::ClobberMemory();
  }
  opscope::remove_callback(handle);
}
BENCHMARK(BM_RangeWithObserver);

// A range under the legacy profiler, enabled on the benchmark's thread: a thread-limited
// window (only member threads record), on the same collector as the Profiler.
void BM_RangeLegacyProfiler(benchmark::State& state) {
  opscope::enable_profiler_legacy();
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::legacy");
    benchmark::ClobberMemory();
  }
  opscope::disable_profiler_legacy({.consolidate = false});
}
BENCHMARK(BM_RangeLegacyProfiler)->UseRealTime()->Iterations(kSessionIterations);

// The same with warm buffer memory: 1500 ranges fit the thread's first chunk, which the
// thread keeps from window to window, so after the first repetition no page is fresh.
void BM_RangeLegacyProfilerWarm(benchmark::State& state) { BM_RangeLegacyProfiler(state); }
BENCHMARK(BM_RangeLegacyProfilerWarm)->UseRealTime()->Iterations(1500)->Repetitions(200);

// A thread that is not a member while a thread-limited window records elsewhere.
void BM_RangeLegacyProfilerOtherThread(benchmark::State& state) {
  opscope::enable_profiler_legacy();
  std::thread([&] {
    for (auto _ : state) {
      OPSCOPE_RECORD_FUNCTION("bench::not_member");
      benchmark::ClobberMemory();
    }
  }).join();
  opscope::disable_profiler_legacy({.consolidate = false});
}
BENCHMARK(BM_RangeLegacyProfilerOtherThread)->UseRealTime();

// disable_profiler_legacy turning a window of 100k ranges into event lists: per range.
void BM_LegacyDisable(benchmark::State& state) {
  constexpr int kRanges = 100'000;
  for (auto _ : state) {
    state.PauseTiming();
    opscope::enable_profiler_legacy();
    for (int i = 0; i < kRanges; ++i) {
      OPSCOPE_RECORD_FUNCTION("bench::legacy_disable");
    }
    state.ResumeTiming();
    benchmark::DoNotOptimize(opscope::disable_profiler_legacy());
  }
  state.SetItemsProcessed(state.iterations() * kRanges);
}
BENCHMARK(BM_LegacyDisable)->Unit(benchmark::kMillisecond);

// Buffer memory per plain range: the window's buffer bytes over the ranges it holds.
void BM_BufferBytesPerRange(benchmark::State& state) {
  constexpr int kRanges = 1'000'000;
  double bytes_per_range = 0;
  for (auto _ : state) {
    opscope::Profiler prof;
    prof.start();
    for (int i = 0; i < kRanges; ++i) {
      OPSCOPE_RECORD_FUNCTION("bench::bytes");
    }
    prof.stop();
    // The ProfilerStep#0 range is one more event; chunks are charged whole.
    bytes_per_range = static_cast<double>(prof.stats().buffer_bytes) /
                      static_cast<double>(prof.stats().events_recorded);
  }
  state.counters["bytes_per_range"] = bytes_per_range;
}
BENCHMARK(BM_BufferBytesPerRange)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

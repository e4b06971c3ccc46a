// What the lenses cost per range, measured against the plain enabled range in the same run:
// record_shapes with two tensor inputs (target <= 3x the plain range), a plain range inside a
// record_shapes session (the slow path every range takes when a lens is on), and a range with
// with_stack and with_modules. Figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>

#include "opscope/module.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"

namespace {

constexpr std::int64_t kIterations = 2'000'000;
opscope::Profiler* g_profiler = nullptr;

[[gnu::noinline]] void range_with_inputs(std::int64_t m, std::int64_t k, std::int64_t n);

// Every benchmark records into buffer memory an earlier window already touched (the chunk
// pool keeps it between Profilers), so that no ratio mixes fresh pages into one side only:
// the first window of the process, recorded here, pays for them.
void warm_the_buffers_once() {
  static const bool warmed = [] {
    opscope::ProfilerConfig config;
    config.lenses.record_shapes = true;
    config.experimental.buffer_limit_bytes = 8ull << 30;
    opscope::Profiler warmup(config);
    warmup.start();
    for (std::int64_t i = 0; i < kIterations; ++i) range_with_inputs(1, 2, 3);
    warmup.stop();
    return true;
  }();
  benchmark::DoNotOptimize(warmed);
}

template <bool kShapes, bool kStack, bool kModules>
void start(const benchmark::State&) {
  warm_the_buffers_once();
  opscope::ProfilerConfig config;
  config.lenses.record_shapes = kShapes;
  config.lenses.with_stack = kStack;
  config.lenses.with_modules = kModules;
  config.experimental.buffer_limit_bytes = 8ull << 30;
  g_profiler = new opscope::Profiler(config);
  g_profiler->start();
}

void stop(const benchmark::State&) {
  g_profiler->stop();
  if (g_profiler->stats().events_dropped != 0) std::abort();  // the figures would be wrong
  delete g_profiler;
  g_profiler = nullptr;
}

[[gnu::noinline]] void plain_range() {
  OPSCOPE_RECORD_FUNCTION("bench::plain");
  benchmark::ClobberMemory();
}

[[gnu::noinline]] void range_with_inputs(std::int64_t m, std::int64_t k, std::int64_t n) {
  OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", opscope::Value::tensor({m, k}),
                                      opscope::Value::tensor({k, n}));
  benchmark::ClobberMemory();
}

// The reference: a plain range with a CPU session and no lens.
void BM_PlainRange(benchmark::State& state) {
  for (auto _ : state) plain_range();
}
BENCHMARK(BM_PlainRange)
    ->Setup(start<false, false, false>)
    ->Teardown(stop)
    ->Iterations(kIterations);

// Two tensor inputs given, no lens asks for them: the inputs are never built.
void BM_InputsNotRecorded(benchmark::State& state) {
  for (auto _ : state) range_with_inputs(32, 64, 128);
}
BENCHMARK(BM_InputsNotRecorded)
    ->Setup(start<false, false, false>)
    ->Teardown(stop)
    ->Iterations(kIterations);

// record_shapes: two tensor inputs encoded into the buffer.
void BM_InputsRecorded(benchmark::State& state) {
  for (auto _ : state) range_with_inputs(32, 64, 128);
}
BENCHMARK(BM_InputsRecorded)
    ->Setup(start<true, false, false>)
    ->Teardown(stop)
    ->Iterations(kIterations);

// A range without inputs inside a record_shapes session.
void BM_PlainRangeShapesSession(benchmark::State& state) {
  for (auto _ : state) plain_range();
}
BENCHMARK(BM_PlainRangeShapesSession)
    ->Setup(start<true, false, false>)
    ->Teardown(stop)
    ->Iterations(kIterations);

// with_stack: the range's native stack captured at begin (the benchmark harness is ~6 deep).
void BM_RangeWithStack(benchmark::State& state) {
  for (auto _ : state) plain_range();
}
BENCHMARK(BM_RangeWithStack)
    ->Setup(start<false, true, false>)
    ->Teardown(stop)
    ->Iterations(kIterations);

// with_stack and with_modules, inside one module.
void BM_RangeWithStackInModule(benchmark::State& state) {
  OPSCOPE_MODULE("Bench");
  for (auto _ : state) plain_range();
}
BENCHMARK(BM_RangeWithStackInModule)
    ->Setup(start<false, true, true>)
    ->Teardown(stop)
    ->Iterations(kIterations);

}  // namespace

BENCHMARK_MAIN();

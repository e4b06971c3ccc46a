// The sampling profiler's own costs: what a range costs while a FunctionProfiler run logs ranges
// (the range log is a global observer, attached only for the run), against a range with
// nothing listening and the two counter reads a range cannot go below; and what turning perf's
// samples into a profile costs per sample. Figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "opscope/internal/clock.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/sampling.h"
#include "sampling/range_log.h"

namespace {

void BM_TwoCounterReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::internal::ticks());
    benchmark::DoNotOptimize(opscope::internal::ticks());
  }
}
BENCHMARK(BM_TwoCounterReads);

void BM_RangeNoSession(benchmark::State& state) {
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::no_session");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RangeNoSession);

// The floor of any observer: a range with one global observer that does nothing.
void BM_RangeWithEmptyObserver(benchmark::State& state) {
  auto handle = opscope::add_global_callback(opscope::RecordFunctionCallback(
      [](const opscope::RecordFunction&) -> std::unique_ptr<opscope::ObserverContext> {
        return nullptr;
      },
      [](const opscope::RecordFunction&, opscope::ObserverContext*) {}));
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::observed");
    benchmark::ClobberMemory();
  }
  opscope::remove_callback(handle);
}
BENCHMARK(BM_RangeWithEmptyObserver);

// A range while the range log listens: the observer call, two counter reads, the thread's
// log locked twice (uncontended). The log is renewed every 1 M ranges so its memory stays bounded.
void BM_RangeUnderRangeLog(benchmark::State& state) {
  auto log = std::make_unique<opscope::sampling::RangeLog>();
  std::int64_t n = 0;
  for (auto _ : state) {
    OPSCOPE_RECORD_FUNCTION("bench::logged");
    benchmark::ClobberMemory();
    if (++n % 1'000'000 == 0) {
      state.PauseTiming();
      log = std::make_unique<opscope::sampling::RangeLog>();
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_RangeUnderRangeLog);

// SampleProfile::build per sample: 20-frame stacks over 50 distinct leaves, one thread, with a
// range open around every fourth sample (state.range(0) = 1) or no ranges (0).
void BM_BuildProfile(benchmark::State& state) {
  opscope::SampleBatch batch;
  batch.event = "cpu-clock";
  std::vector<opscope::SampledRange> ranges;
  constexpr int kSamples = 20'000;
  for (int i = 0; i < kSamples; ++i) {
    opscope::Sample sample{1, static_cast<std::uint64_t>(i) * 1000, 1, {}};
    sample.frames.push_back("leaf_" + std::to_string(i % 50));
    for (int f = 1; f < 20; ++f) sample.frames.push_back("caller_" + std::to_string(f));
    batch.samples.push_back(std::move(sample));
    if (state.range(0) == 1 && i % 4 == 0) {
      ranges.push_back({1, static_cast<std::uint64_t>(i) * 1000 - 1,
                        static_cast<std::uint64_t>(i) * 1000 + 1, "op_" + std::to_string(i % 7)});
    }
  }
  for (auto _ : state) {
    opscope::SampleProfile profile = opscope::SampleProfile::build(batch, ranges);
    benchmark::DoNotOptimize(profile.total_samples());
  }
  state.SetItemsProcessed(state.iterations() * kSamples);
}
BENCHMARK(BM_BuildProfile)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// What the execution trace costs per op: a range with two tensor inputs (an mm) with the
// observer running, registered but stopped, and with no observer at all, in the same run so
// that the ratios hold on a noisy machine. Figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "opscope/execution_trace.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace {

// Each running iteration writes a node of about 700 bytes: a fixed count keeps the file
// (removed at teardown) to a few hundred MB per repetition.
constexpr std::int64_t kIterations = 300'000;

std::unique_ptr<opscope::ExecutionTraceObserver> g_et;
std::string g_dir;

void register_et(const benchmark::State&) {
  char dir[] = "/tmp/opscope_et_bench.XXXXXX";
  if (::mkdtemp(dir) == nullptr) std::abort();
  g_dir = dir;
  g_et = std::make_unique<opscope::ExecutionTraceObserver>();
  g_et->register_callback(g_dir + "/et.json");
}

void start_et(const benchmark::State& state) {
  register_et(state);
  g_et->start();
}

void unregister_et(const benchmark::State&) {
  g_et->unregister_callback();  // includes writing the file's tail: outside the timed loop
  g_et.reset();
  std::filesystem::remove_all(g_dir);
}

[[gnu::noinline]] void mm_range() {
  OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", opscope::Value::tensor({64, 128}),
                                      opscope::Value::tensor({128, 256}));
  benchmark::ClobberMemory();
}

void BM_MmRangeNoObserver(benchmark::State& state) {
  for (auto _ : state) mm_range();
}
BENCHMARK(BM_MmRangeNoObserver)->Iterations(kIterations);

void BM_MmRangeEtStopped(benchmark::State& state) {
  for (auto _ : state) mm_range();
}
BENCHMARK(BM_MmRangeEtStopped)
    ->Setup(register_et)
    ->Teardown(unregister_et)
    ->Iterations(kIterations);

void BM_MmRangeEtRunning(benchmark::State& state) {
  for (auto _ : state) mm_range();
}
BENCHMARK(BM_MmRangeEtRunning)->Setup(start_et)->Teardown(unregister_et)->Iterations(kIterations);

}  // namespace

BENCHMARK_MAIN();

// How long a helper thread takes to first run while its creator keeps its own core busy, as a
// trace reader does the moment it has started its parsing helper: std::thread against
// util::start_thread_beside (src/util/thread_start.h says why they differ). Each iteration
// sleeps first, so that the other core is idle as in a process that just started, then times
// from the start call to the helper's first instruction (manual time, so the sleep does not
// count). The helper only notes the time and ends.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "util/thread_start.h"

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Start>
void first_run(benchmark::State& state, Start start) {
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::atomic<std::int64_t> ran{0};
    const std::int64_t begin = now_ns();
    std::thread t = start([&ran] { ran.store(now_ns()); });
    while (ran.load(std::memory_order_relaxed) == 0) {
      // the creator's own work goes on: its core stays busy
    }
    t.join();
    state.SetIterationTime(static_cast<double>(ran.load() - begin) * 1e-9);
  }
}

void BM_HelperFirstRuns_StdThread(benchmark::State& state) {
  first_run(state, [](auto body) { return std::thread(body); });
}
void BM_HelperFirstRuns_Beside(benchmark::State& state) {
  first_run(state, [](auto body) { return opscope::util::start_thread_beside(body); });
}

BENCHMARK(BM_HelperFirstRuns_StdThread)
    ->UseManualTime()
    ->Iterations(30)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HelperFirstRuns_Beside)
    ->UseManualTime()
    ->Iterations(30)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

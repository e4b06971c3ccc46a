// key_averages() + table() over a 1 M event window (DESIGN.md target: <= 100 ms; PyTorch 1.13
// takes ~11 s). The window is built once: 4 threads, 200 distinct names, ranges nested 3 deep.
// Names are interned per thread, as the collector does, and threads 2 and 3 hold their own
// copies of the names, so the text merge after pointer grouping is exercised too.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "opscope/key_averages.h"
#include "opscope/result.h"

namespace {

constexpr int kThreads = 4;
constexpr int kNames = 200;
constexpr std::size_t kEvents = 1'000'000;

std::shared_ptr<const opscope::ProfilerResult> make_window() {
  opscope::ProfilerResult::Builder b;
  b.reserve(kEvents);
  std::vector<std::string_view> shared_names;
  for (int n = 0; n < kNames; ++n) shared_names.push_back(b.keep("aten::op_" + std::to_string(n)));

  // One unit: an outer range holding 2 middle ranges holding 2 leaves each, 7 events 3 deep.
  constexpr std::size_t kPerUnit = 7;
  const std::size_t units_per_thread = kEvents / kPerUnit / kThreads;
  for (int t = 0; t < kThreads; ++t) {
    std::int32_t thread = b.add_thread({static_cast<std::uint64_t>(1000 + t), "worker"});
    std::vector<std::string_view> names = shared_names;
    if (t >= 2) {
      for (int n = 0; n < kNames; ++n) names[n] = b.keep("aten::op_" + std::to_string(n));
    }
    std::int64_t now = 1'700'000'000'000'000'000;
    std::size_t pick = static_cast<std::size_t>(t);
    auto add = [&](std::int64_t start, std::int64_t end) {
      opscope::Event e;
      e.name = names[pick++ % kNames];
      e.thread = thread;
      e.start_ns = start;
      e.end_ns = end;
      b.add_event(e);
    };
    for (std::size_t u = 0; u < units_per_thread; ++u) {
      add(now, now + 1000);
      for (int m = 0; m < 2; ++m) {
        std::int64_t mid = now + 10 + m * 490;
        add(mid, mid + 480);
        add(mid + 10, mid + 200);
        add(mid + 250, mid + 470);
      }
      now += 1100;
    }
  }
  return b.finish();
}

void BM_KeyAveragesAndTable(benchmark::State& state) {
  static const auto window = make_window();
  std::size_t chars = 0;
  for (auto _ : state) {
    opscope::KeyAverages avg = opscope::key_averages(*window);
    std::string table = avg.table({.sort_by = "self_cpu_time_total", .row_limit = 100});
    chars += table.size();
    benchmark::DoNotOptimize(table.data());
  }
  state.counters["events"] = static_cast<double>(window->events().size());
  state.counters["rows"] = static_cast<double>(opscope::key_averages(*window).rows().size());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * window->events().size()));
  benchmark::DoNotOptimize(chars);
}
BENCHMARK(BM_KeyAveragesAndTable)->Unit(benchmark::kMillisecond);

// The two halves, to see where the time goes.
void BM_KeyAveragesOnly(benchmark::State& state) {
  static const auto window = make_window();
  for (auto _ : state) benchmark::DoNotOptimize(opscope::key_averages(*window));
}
BENCHMARK(BM_KeyAveragesOnly)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// Chrome trace export: 1 M events (4 threads, 200 names, nested three deep) to memory, to a
// file and to a gzip file. DESIGN.md's target is >= 20 M events/s uncompressed.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "export/chrome_trace.h"
#include "export/sink.h"
#include "opscope/export.h"
#include "opscope/result.h"

namespace {

constexpr int kEvents = 1'000'000;
constexpr int kThreads = 4;
constexpr int kNames = 200;

// Per thread, repeated "steps" of one root holding three ops holding two ops each: names
// shared by pointer as call sites share them, handles as RecordFunction makes them, and one
// op in ten carrying an autograd sequence number.
const opscope::ProfilerResult& result() {
  static const std::shared_ptr<const opscope::ProfilerResult> r = [] {
    opscope::ProfilerResult::Builder b;
    constexpr std::int64_t kBase = 1'700'000'000'000'000'000;
    std::vector<std::string_view> names;
    for (int i = 0; i < kNames; ++i) {
      names.push_back(b.keep((i % 2 ? "aten::op_" : "model.layer") + std::to_string(i)));
    }
    b.reserve(kEvents);
    for (int t = 0; t < kThreads; ++t) {
      b.add_thread({static_cast<std::uint64_t>(40000 + t), "worker " + std::to_string(t)});
    }
    std::uint64_t id = 0;
    for (int t = 0; t < kThreads; ++t) {
      std::int64_t now = kBase + 12'345;
      int n = 0;
      const auto add = [&](std::int64_t start, std::int64_t end, std::uint32_t depth) {
        opscope::Event e;
        e.name = names[(id * 7 + depth) % kNames];
        e.start_ns = start;
        e.end_ns = end;
        e.handle = (static_cast<std::uint64_t>(t) << 32) | ++id;
        if (id % 10 == 0) e.sequence_nr = static_cast<std::int64_t>(id);
        e.thread = t;
        e.scope = depth == 0 ? opscope::RecordScope::kUserScope : opscope::RecordScope::kFunction;
        b.add_event(e);
        ++n;
      };
      while (n < kEvents / kThreads) {
        const std::int64_t root = now;
        add(root, root + 10'000, 0);
        for (int c = 0; c < 3; ++c) {
          const std::int64_t cs = root + 100 + c * 3'000;
          add(cs, cs + 2'500, 1);
          add(cs + 100, cs + 1'100, 2);
          add(cs + 1'200, cs + 2'237, 2);
        }
        now += 10'500;
      }
    }
    b.set_window(kBase, kBase + 1'000'000'000);
    b.set_pid(::getpid());
    return b.finish();
  }();
  return *r;
}

void report(benchmark::State& state, std::size_t bytes) {
  const double events = static_cast<double>(result().events().size());
  state.counters["events/s"] =
      benchmark::Counter(events * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.counters["bytes/event"] = static_cast<double>(bytes) / events;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

// Formatting alone: the sink drops the blocks.
void BM_ChromeTraceFormatOnly(benchmark::State& state) {
  struct NullSink final : opscope::internal::Sink {
    std::size_t bytes = 0;
    void write(std::string_view b) override { bytes += b.size(); }
    void commit() override {}
  };
  const opscope::ProfilerResult& r = result();
  NullSink sink;
  for (auto _ : state) {
    sink.bytes = 0;
    opscope::internal::write_chrome_trace(r, "bench", sink);
  }
  report(state, sink.bytes);
}
BENCHMARK(BM_ChromeTraceFormatOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

// The exporter into memory: the sink's memory is reused, so neither the allocator nor page faults
// are measured.
void BM_ChromeTraceToMemory(benchmark::State& state) {
  const opscope::ProfilerResult& r = result();
  opscope::internal::MemorySink sink;
  sink.reserve(256u * kEvents);
  for (auto _ : state) {
    sink.clear();
    opscope::internal::write_chrome_trace(r, "bench", sink);
    benchmark::DoNotOptimize(sink.data().data());
  }
  report(state, sink.data().size());
}
BENCHMARK(BM_ChromeTraceToMemory)->Unit(benchmark::kMillisecond)->UseRealTime();

// The public string API: includes allocating (and faulting in) the returned string.
void BM_ChromeTraceJsonString(benchmark::State& state) {
  const opscope::ProfilerResult& r = result();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string s = opscope::chrome_trace_json(r, "bench");
    bytes = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  report(state, bytes);
}
BENCHMARK(BM_ChromeTraceJsonString)->Unit(benchmark::kMillisecond)->UseRealTime();

// Each iteration writes a new file, as TensorBoard's time-stamped names do: replacing an
// existing file makes ext4 start writing the new one back inside rename(), which is the
// file system's time, not the exporter's.
void export_to(benchmark::State& state, const std::string& path) {
  const opscope::ProfilerResult& r = result();
  for (auto _ : state) {
    state.PauseTiming();
    std::remove(path.c_str());
    state.ResumeTiming();
    opscope::export_chrome_trace(r, path);
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  report(state, static_cast<std::size_t>(size));
  std::remove(path.c_str());
}

void BM_ChromeTraceToFile(benchmark::State& state) {
  export_to(state, "/tmp/opscope_export_bench." + std::to_string(::getpid()) + ".json");
}
BENCHMARK(BM_ChromeTraceToFile)->Unit(benchmark::kMillisecond)->UseRealTime();

// bytes/event here is the compressed size.
void BM_ChromeTraceToGzip(benchmark::State& state) {
  export_to(state, "/tmp/opscope_export_bench." + std::to_string(::getpid()) + ".json.gz");
}
BENCHMARK(BM_ChromeTraceToGzip)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

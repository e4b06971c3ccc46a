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
//
// BM_FreshMemoryFloor measures, in children of its own, what a first window cannot go below on
// this machine whatever the profiler does: the two counter reads and a 16-byte store per
// iteration (a compact range's slot), into 2 MiB chunks of fresh memory that a second thread
// maps ahead with MAP_POPULATE, as opscope's refill thread does; nothing of opscope's but its
// counter read. Its ratio to two counter reads is the bound the first window's ratio is judged
// beside (scripts/bench prints both).
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <time.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
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

// The floor of any range: two counter reads per iteration, process CPU per iteration.
double two_tsc_reads_per_iteration(int threads) {
  return cpu_per_iteration(threads, [] {
    for (std::int64_t i = 0; i < kRangesPerThread; ++i) {
      benchmark::DoNotOptimize(opscope::internal::ticks());
      benchmark::DoNotOptimize(opscope::internal::ticks());
    }
  });
}

// Runs `measure` in a fresh child for each iteration of `state` and returns what the last one
// measured, or nullopt (the benchmark marked failed) when a child failed.
template <typename Measure>
auto measured_in_children(benchmark::State& state, Measure measure)
    -> std::optional<decltype(measure())> {
  std::optional<decltype(measure())> last;
  for (auto _ : state) {
    last = in_fresh_process(measure);
    if (!last) {
      state.SkipWithError("the measuring child failed");
      return std::nullopt;
    }
  }
  return last;
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
  f.floor_ns = two_tsc_reads_per_iteration(threads);
  f.first_ns = window_cpu_per_range(threads);
  f.next_ns = window_cpu_per_range(threads);
  f.idle_pool_mib = static_cast<double>(opscope::collect::pooled_chunk_bytes()) / (1 << 20);
  return f;
}

void BM_FirstWindowProcessCpu(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto got = measured_in_children(state, [threads] { return measure_in_child(threads); });
  if (!got) return;
  const ChildFigures& f = *got;
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

// Chunks of fresh memory mapped ahead by a thread of their own, kept two ahead of demand.
class FreshChunks {
 public:
  static constexpr std::size_t kBytes = 2u << 20;

  FreshChunks() : mapper_([this] { map_ahead(); }) {}
  ~FreshChunks() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_all();
    mapper_.join();
    for (void* c : ready_) ::munmap(c, kBytes);
    for (void* c : taken_) ::munmap(c, kBytes);
  }

  // A mapped chunk, waiting for the mapper when none is ready.
  void* take() {
    std::unique_lock<std::mutex> lock(mu_);
    taken_wait_.wait(lock, [&] { return !ready_.empty(); });
    void* c = ready_.back();
    ready_.pop_back();
    taken_.push_back(c);
    lock.unlock();
    wake_.notify_one();
    return c;
  }

 private:
  void map_ahead() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      if (ready_.size() >= 2) {
        wake_.wait(lock);
        continue;
      }
      lock.unlock();
      void* c = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (c == MAP_FAILED) std::abort();
      lock.lock();
      ready_.push_back(c);
      taken_wait_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;        // the mapper waits here
  std::condition_variable taken_wait_;  // takers wait here
  std::vector<void*> ready_;
  std::vector<void*> taken_;
  bool done_ = false;
  std::thread mapper_;
};

struct FloorFigures {
  double floor_ns;
  double fresh_ns;
};

FloorFigures measure_fresh_floor_in_child(int threads) {
  FloorFigures f{};
  f.floor_ns = two_tsc_reads_per_iteration(threads);
  const double before = process_cpu_ns();
  FreshChunks chunks;  // its mapper starts here, as a refill thread starts with the window
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&chunks] {
      struct Slot {
        std::uint64_t word[2];
      };
      Slot* cur = nullptr;
      Slot* end = nullptr;
      std::uint64_t base = 0;
      for (std::int64_t i = 0; i < kRangesPerThread; ++i) {
        const std::uint64_t start = opscope::internal::ticks();
        const std::uint64_t stop = opscope::internal::ticks();
        if (cur == end) {
          cur = static_cast<Slot*>(chunks.take());
          end = cur + FreshChunks::kBytes / sizeof(Slot);
          base = start;
        }
        *cur++ = Slot{{(start - base) | ((stop - start) << 32), static_cast<std::uint64_t>(i)}};
        benchmark::ClobberMemory();
      }
    });
  }
  for (auto& t : pool) t.join();
  f.fresh_ns = (process_cpu_ns() - before) / static_cast<double>(kRangesPerThread * threads);
  return f;
}

void BM_FreshMemoryFloor(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto got =
      measured_in_children(state, [threads] { return measure_fresh_floor_in_child(threads); });
  if (!got) return;
  const FloorFigures& f = *got;
  state.counters["floor_ns"] = f.floor_ns;
  state.counters["fresh_ns"] = f.fresh_ns;
  state.counters["fresh_ratio"] = f.fresh_ns / f.floor_ns;
}
BENCHMARK(BM_FreshMemoryFloor)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// The profile_memory lens: what an allocation report costs with no session, with a session
// that does not record memory, and while memory is recorded; and what malloc/free and
// new/delete cost through the allocator hook (opscope::memhook) against glibc's own entry
// points in the same process. The floor quoted with them is two counter reads, as in
// record_bench. Figures go to bench/RESULTS.md.
//
// The hook replaces malloc process-wide, so it can only be compared with glibc inside a
// program linked with it: there, malloc() is the hook and __libc_malloc() is glibc's. This
// file builds either way; the "memhook" context line of the output says which it is, and
// without the hook the malloc/new figures are plain glibc's. (bench/CMakeLists.txt links
// memory_bench with opscope::memhook when the target exists.) BM_HookWorkRecording measures
// what the hook adds while recording without needing it linked: the same calls it makes.
//
// Each pair benchmark does one allocation and its free per iteration: two reports.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "record/hook_abi.h"
#include "opscope/internal/clock.h"
#include "opscope/memory.h"
#include "opscope/profiler.h"

extern "C" {
void* __libc_malloc(std::size_t size);
void __libc_free(void* ptr);
}

namespace {

// The floor of anything the profiler records.
void BM_TwoCounterReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::internal::ticks());
    benchmark::DoNotOptimize(opscope::internal::ticks());
  }
}
BENCHMARK(BM_TwoCounterReads);

// What is listening while a benchmark runs (its argument).
enum Mode : int {
  kNoSession = 0,     // no Profiler started
  kNoMemoryLens = 1,  // a CPU session without profile_memory
  kRecording = 2,     // a session with profile_memory
};

// Runs the mode's session for a benchmark. While memory is recorded, the window is rotated
// every kWindowIterations iterations with the timer paused, so that the buffer never reaches
// its limit (an event dropped at the limit costs less than one recorded, which would flatter
// the figure) and memory stays bounded: 2^18 iterations of two 64-byte reports are 32 MiB of
// buffer. The other modes record nothing per iteration and keep one window: restarting a
// Profiler restarts its chunk refill thread, which would compete with the timed loop.
//
// Quote CPU time: while recording, the refill thread maps buffer on the other core (its work
// is the price of recording, but not this thread's), and on a loaded 2-core machine the wall
// time of a loop that shares the cores with it varies far more than its CPU time.
class Session {
 public:
  static constexpr std::int64_t kWindowIterations = std::int64_t{1} << 18;

  explicit Session(int mode) : mode_(mode) { start(); }
  ~Session() { stop(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Once per iteration: one compare, the same in every mode.
  void tick(benchmark::State& state) {
    if (++n_ != kWindowIterations) return;
    n_ = 0;
    if (mode_ != kRecording) return;
    state.PauseTiming();
    stop();
    start();
    state.ResumeTiming();
  }

 private:
  void start() {
    if (mode_ == kNoSession) return;
    profiler_ = std::make_unique<opscope::Profiler>(
        opscope::ProfilerConfig{.lenses = {.profile_memory = mode_ == kRecording}});
    profiler_->start();
  }
  void stop() {
    if (profiler_ == nullptr) return;
    profiler_->stop();
    profiler_.reset();
  }

  int mode_;
  std::int64_t n_ = 0;
  std::unique_ptr<opscope::Profiler> profiler_;
};

void modes(benchmark::internal::Benchmark* b) {
  b->ArgName("mode")->Arg(kNoSession)->Arg(kNoMemoryLens)->Arg(kRecording);
}

// report_memory_usage as an allocator calls it: the allocation, then its free.
void BM_ReportPair(benchmark::State& state) {
  Session session(static_cast<int>(state.range(0)));
  alignas(64) static char block[64];
  std::int64_t total = 0;
  for (auto _ : state) {
    total += 64;
    opscope::report_memory_usage(block, 64, total, total);
    total -= 64;
    opscope::report_memory_usage(block, -64, total, total);
    session.tick(state);
  }
  benchmark::DoNotOptimize(total);
}
BENCHMARK(BM_ReportPair)->Apply(modes);

// glibc's malloc and free under their own names: what the hook forwards to.
void BM_LibcMallocFree(benchmark::State& state) {
  for (auto _ : state) {
    void* p = __libc_malloc(64);
    benchmark::DoNotOptimize(p);
    __libc_free(p);
  }
}
BENCHMARK(BM_LibcMallocFree);

// malloc and free: the hook's when this program is linked with it.
void BM_MallocFree(benchmark::State& state) {
  Session session(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    void* p = std::malloc(64);
    benchmark::DoNotOptimize(p);
    std::free(p);
    session.tick(state);
  }
}
BENCHMARK(BM_MallocFree)->Apply(modes);

// operator new and delete: the hook's own forms when linked (they do not go through its
// malloc), libstdc++'s otherwise.
void BM_NewDelete(benchmark::State& state) {
  Session session(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    void* p = ::operator new(64);
    benchmark::DoNotOptimize(p);
    ::operator delete(p, 64);
    session.tick(state);
  }
}
BENCHMARK(BM_NewDelete)->Apply(modes);

// What the hook does per malloc/free pair while recording, without the hook: glibc's calls,
// malloc_usable_size, and the two reports with opscope's totals.
void BM_HookWorkRecording(benchmark::State& state) {
  Session session(kRecording);
  for (auto _ : state) {
    void* p = __libc_malloc(64);
    benchmark::DoNotOptimize(p);
    if (opscope::memory_profiling_enabled()) {
      opscope::internal::report_hooked_memory(p, static_cast<std::int64_t>(malloc_usable_size(p)));
    }
    if (opscope::memory_profiling_enabled()) {
      opscope::internal::report_hooked_memory(p, -static_cast<std::int64_t>(malloc_usable_size(p)));
    }
    __libc_free(p);
    session.tick(state);
  }
}
BENCHMARK(BM_HookWorkRecording);

bool memhook_linked() {
  Dl_info info{};
  return ::dladdr(reinterpret_cast<void*>(&::malloc), &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "opscope_memhook") != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("memhook", memhook_linked() ? "linked: malloc and new are the hook's"
                                                          : "not linked: malloc is glibc's");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

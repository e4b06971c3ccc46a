// The with_stack lens's costs: capturing a native stack of 10 and 30 frames with each
// unwinder (on the hot path, at range begin), entering a module, and symbolizing at export
// (per distinct address, cold, and again from the cache). The floor the capture is compared
// with is the same as record_bench's: two counter reads, the cost of a plain enabled range.
// Figures go to bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <link.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "analysis/symbolizer.h"
#include "opscope/internal/clock.h"
#include "opscope/module.h"
#include "opscope/profiler.h"
#include "record/stack_capture.h"

namespace {

using opscope::record::Unwinder;

void BM_TwoCounterReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::internal::ticks());
    benchmark::DoNotOptimize(opscope::internal::ticks());
  }
}
BENCHMARK(BM_TwoCounterReads);

// Recurses until `depth` frames of its own are on the stack, then runs the benchmark loop
// there. Each capture is limited to `depth` frames, so it walks exactly that many, all in
// code built with frame pointers (the benchmark library's own frames have none).
[[gnu::noipa]] void capture_at_depth(benchmark::State& state, int depth, std::size_t frames) {
  if (depth > 1) {
    capture_at_depth(state, depth - 1, frames);
    benchmark::ClobberMemory();  // not a tail call: the frame stays
    return;
  }
  std::array<std::uint64_t, opscope::record::kMaxStackFrames> words;
  std::size_t n = 0;
  for (auto _ : state) {
    n = opscope::record::capture_stack(words.data(), frames, 0, false);
    benchmark::DoNotOptimize(words.data());
    benchmark::DoNotOptimize(n);
  }
  if (n != frames) state.SkipWithError("the stack was shallower than asked");
}

// Arguments: unwinder (0 frame pointers, 1 DWARF), frames.
void BM_CaptureStack(benchmark::State& state) {
  const auto unwinder = static_cast<Unwinder>(state.range(0));
  const auto frames = static_cast<std::size_t>(state.range(1));
  const Unwinder before = opscope::record::unwinder();
  opscope::record::set_unwinder(unwinder);
  capture_at_depth(state, static_cast<int>(frames) + 2, frames);
  opscope::record::set_unwinder(before);
  state.SetLabel(unwinder == Unwinder::kDwarf ? "dwarf" : "frame pointers");
}
BENCHMARK(BM_CaptureStack)
    ->ArgNames({"unwinder", "frames"})
    ->Args({0, 10})
    ->Args({0, 30})
    ->Args({1, 10})
    ->Args({1, 30});

// A session that enters modules, for the module benchmarks.
opscope::Profiler* g_profiler = nullptr;
void start_modules(const benchmark::State&) {
  g_profiler = new opscope::Profiler({.lenses = {.with_stack = true, .with_modules = true}});
  g_profiler->start();
}
void stop_modules(const benchmark::State&) {
  g_profiler->stop();
  delete g_profiler;
  g_profiler = nullptr;
}

// Entering and leaving a module that was seen before (its names interned already).
void BM_ModuleEnter(benchmark::State& state) {
  OPSCOPE_MODULE("Model");
  for (auto _ : state) {
    OPSCOPE_MODULE("Linear_0");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ModuleEnter)->Setup(start_modules)->Teardown(stop_modules);

// A capture of 10 native frames with two modules placed among them.
[[gnu::noipa]] void capture_in_modules(benchmark::State& state, int depth) {
  if (depth == 4 || depth == 8) {
    OPSCOPE_MODULE(depth == 4 ? "Linear_0" : "MLP");
    capture_in_modules(state, depth - 1);
    benchmark::ClobberMemory();
    return;
  }
  if (depth > 1) {
    capture_in_modules(state, depth - 1);
    benchmark::ClobberMemory();
    return;
  }
  std::array<std::uint64_t, opscope::record::kMaxStackFrames> words;
  for (auto _ : state) {
    benchmark::DoNotOptimize(opscope::record::capture_stack(words.data(), 12, 0, true));
    benchmark::DoNotOptimize(words.data());
  }
}
void BM_CaptureStackWithModules(benchmark::State& state) { capture_in_modules(state, 12); }
BENCHMARK(BM_CaptureStackWithModules)->Setup(start_modules)->Teardown(stop_modules);

// Distinct code addresses spread over this program's executable segment and libc's: what a
// real export resolves, one frame each in many functions.
std::vector<std::uint64_t> code_addresses(std::size_t count) {
  struct Range {
    std::uint64_t begin, end;
  };
  std::vector<Range> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& out = *static_cast<std::vector<Range>*>(data);
        const std::string_view name = info->dlpi_name;
        if (!name.empty() && name.find("libc.so") == std::string_view::npos) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            out.push_back(
                {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
          }
        }
        return 0;
      },
      &ranges);
  std::vector<std::uint64_t> out;
  if (ranges.empty()) std::abort();
  for (const Range& r : ranges) {
    const std::uint64_t step = (r.end - r.begin) / (count / ranges.size() + 1);
    for (std::uint64_t a = r.begin + step / 2; a < r.end && out.size() < count; a += step) {
      out.push_back(a);
    }
  }
  return out;
}

// A fresh Symbolizer: opening the process's modules (reading /proc/self/maps) and resolving
// its first address, which loads that object's symbols and line tables.
void BM_SymbolizerFirstAddress(benchmark::State& state) {
  const std::vector<std::uint64_t> pcs = code_addresses(1);
  for (auto _ : state) {
    opscope::analysis::Symbolizer s;
    benchmark::DoNotOptimize(s.resolve(pcs[0]).function.size());
  }
}
BENCHMARK(BM_SymbolizerFirstAddress)->Unit(benchmark::kMicrosecond);

// Per distinct address once the modules are open (cold: not in the cache). Each iteration
// resolves 512 addresses with a new Symbolizer, minus its setup measured above.
void BM_SymbolizeDistinctAddress(benchmark::State& state) {
  const std::vector<std::uint64_t> pcs = code_addresses(512);
  for (auto _ : state) {
    state.PauseTiming();
    auto* s = new opscope::analysis::Symbolizer;
    s->resolve(pcs[0]);  // opens the modules and loads the first object's tables
    s->resolve(pcs.back());
    state.ResumeTiming();
    for (std::size_t i = 1; i + 1 < pcs.size(); ++i) {
      benchmark::DoNotOptimize(s->resolve(pcs[i]).function.size());
    }
    state.PauseTiming();
    delete s;
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pcs.size() - 2));
}
BENCHMARK(BM_SymbolizeDistinctAddress)->Unit(benchmark::kMicrosecond);

// An address already resolved: the cache, and the frame's text built from it.
void BM_SymbolizeCached(benchmark::State& state) {
  const std::vector<std::uint64_t> pcs = code_addresses(64);
  opscope::analysis::Symbolizer s;
  for (std::uint64_t pc : pcs) s.resolve(pc);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.resolve(pcs[i++ & 63]).function.size());
  }
}
BENCHMARK(BM_SymbolizeCached);

void BM_SymbolizedTextCached(benchmark::State& state) {
  const std::vector<std::uint64_t> pcs = code_addresses(64);
  opscope::analysis::Symbolizer s;
  for (std::uint64_t pc : pcs) s.resolve(pc);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.text({pcs[i++ & 63], {}}));
  }
}
BENCHMARK(BM_SymbolizedTextCached);

}  // namespace

BENCHMARK_MAIN();

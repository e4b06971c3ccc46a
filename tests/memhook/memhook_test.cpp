// The allocator hook (opscope::memhook) end to end: this program is linked with it, so its
// own malloc/free and operator new/delete are what a profile_memory session sees.
//
// A hook that deadlocks fails its test instead of hanging the suite: the tests that could
// deadlock run in a forked child with a deadline (run_in_child).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "opscope/key_averages.h"
#include "opscope/memory.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"

namespace opscope {
namespace {

// Keeps the compiler from removing an allocation it can see is unused (it may pair a new
// with its delete, or a malloc with its free, and drop both).
void escape(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

std::vector<const Event*> memory_events(const ProfilerResult& r) {
  std::vector<const Event*> out;
  for (const Event& e : r.events()) {
    if (e.kind == EventKind::kMemory) out.push_back(&e);
  }
  return out;
}

const MemoryUse& use_of(const ProfilerResult& r, const Event& e) { return r.detail(e)->memory; }

std::vector<const Event*> events_at(const ProfilerResult& r, const void* p) {
  std::vector<const Event*> out;
  for (const Event* e : memory_events(r)) {
    if (use_of(r, *e).address == reinterpret_cast<std::uint64_t>(p)) out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event* a, const Event* b) { return a->start_ns < b->start_ns; });
  return out;
}

std::string_view parent_name(const ProfilerResult& r, const Event& e) {
  return e.parent < 0 ? std::string_view("(none)")
                      : r.events()[static_cast<std::size_t>(e.parent)].name;
}

const FunctionEventAvg* row(const KeyAverages& k, std::string_view key) {
  for (const auto& r : k.rows()) {
    if (r.key == key) return &r;
  }
  return nullptr;
}
// The row would dangle as soon as the statement ends: keep the KeyAverages.
const FunctionEventAvg* row(KeyAverages&&, std::string_view) = delete;

// Expects the first report at `p` to be an allocation of at least `min_bytes` and the next
// one its free, of the same size, and returns the size (0 when that failed). The address may
// be reused by a later allocation of the same window (opscope's own, at stop).
std::int64_t expect_alloc_then_free(const ProfilerResult& r, const void* p, std::int64_t min_bytes,
                                    const std::string& what) {
  SCOPED_TRACE(what);
  const std::vector<const Event*> at = events_at(r, p);
  EXPECT_GE(at.size(), 2u);
  if (at.size() < 2) return 0;
  const MemoryUse& a = use_of(r, *at[0]);
  const MemoryUse& f = use_of(r, *at[1]);
  EXPECT_EQ(a.action, MemoryAction::kAllocate);
  EXPECT_EQ(f.action, MemoryAction::kFree);
  EXPECT_GE(a.bytes, min_bytes);
  // malloc_usable_size: what was asked rounded up to glibc's chunk granularity.
  EXPECT_LE(a.bytes, std::max<std::int64_t>(min_bytes, 24) + 64);
  EXPECT_EQ(f.bytes, -a.bytes);
  EXPECT_EQ(a.device, (Device{DeviceType::kCPU, -1}));
  return a.bytes;
}

// The hook's totals of a window must form one chain: in the order the reports were counted,
// each one's total is the previous total plus its bytes. Reports on several threads are
// recorded in another order than they are counted, so the chain is checked as multisets:
// {total - bytes} and {total} differ only by where it starts and where it ends. Returns
// (start, end).
std::pair<std::int64_t, std::int64_t> expect_one_chain(const ProfilerResult& r) {
  std::map<std::int64_t, int> balance;  // +1 per "before", -1 per "after"
  std::int64_t sum = 0;
  for (const Event* e : memory_events(r)) {
    const MemoryUse& m = use_of(r, *e);
    EXPECT_GE(m.total_allocated, 0);
    EXPECT_EQ(m.total_reserved, m.total_allocated);
    ++balance[m.total_allocated - m.bytes];
    --balance[m.total_allocated];
    sum += m.bytes;
  }
  std::vector<std::int64_t> starts, ends;
  for (const auto& [value, n] : balance) {
    for (int i = 0; i < n; ++i) starts.push_back(value);
    for (int i = 0; i < -n; ++i) ends.push_back(value);
  }
  if (sum == 0) {
    EXPECT_TRUE(starts.empty() && ends.empty()) << "the totals do not form one chain";
    return {0, 0};
  }
  EXPECT_EQ(starts.size(), 1u) << "the totals do not form one chain";
  EXPECT_EQ(ends.size(), 1u) << "the totals do not form one chain";
  if (starts.size() != 1 || ends.size() != 1) return {0, 0};
  // The identity a reader relies on: the Bytes of a window add up to its last Total
  // Allocated minus where the first report started from.
  EXPECT_EQ(sum, ends[0] - starts[0]);
  return {starts[0], ends[0]};
}

// Runs `body` in a forked child and fails when it fails or does not finish within `limit`
// (a deadlock in the hook would otherwise hang the whole suite). Only the calling thread
// survives fork(), so no other thread may hold a lock then: call it with no Profiler started
// (a started one runs opscope's chunk refill thread).
void run_in_child(const std::function<void()>& body,
                  std::chrono::seconds limit = std::chrono::seconds(30)) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    body();
    std::fflush(stdout);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the child did not finish within " << limit.count()
             << " s: the hook deadlocked (a report re-entered opscope while it allocated)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's expectations failed (see above)";
}

TEST(MemHook, TheProgramExportsWhatTheHookCalls) {
  // The hook binds these by name, weakly; a program that does not export them gets an inert
  // hook. src/memhook/CMakeLists.txt passes the mangled name with -u: if the declaration in
  // hook_abi.h changes, this is the test that says so.
  EXPECT_NE(::dlsym(RTLD_DEFAULT, "_ZN7opscope8internal20report_hooked_memoryEPKvl"), nullptr);
  EXPECT_NE(::dlsym(RTLD_DEFAULT, "_ZN7opscope8internal8g_lensesE"), nullptr);
  // And malloc is the hook's, not glibc's.
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&::malloc), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("opscope_memhook"), std::string::npos)
      << info.dli_fname;
}

TEST(MemHook, NewAndMallocAreReportedWithTheirSizeAndAttributedToTheRange) {
  constexpr std::size_t kNew = 3000, kMalloc = 5000;
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  char* a = nullptr;
  void* m = nullptr;
  {
    OPSCOPE_RECORD_FUNCTION("memhook_allocating");
    a = new char[kNew];
    escape(a);
    m = std::malloc(kMalloc);
    escape(m);
  }
  {
    OPSCOPE_RECORD_FUNCTION("memhook_freeing");
    delete[] a;
    std::free(m);
  }
  prof.stop();
  const ProfilerResult& r = prof.result();

  const std::int64_t new_bytes = expect_alloc_then_free(r, a, kNew, "new char[]");
  const std::int64_t malloc_bytes = expect_alloc_then_free(r, m, kMalloc, "malloc");
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(m)}) {
    const std::vector<const Event*> at = events_at(r, p);
    ASSERT_GE(at.size(), 2u);
    EXPECT_EQ(parent_name(r, *at[0]), "memhook_allocating");
    EXPECT_EQ(parent_name(r, *at[1]), "memhook_freeing");
    EXPECT_EQ(use_of(r, *at[0]).category, MemoryCategory::kUnknown);
  }
  // Nothing else allocates inside the two ranges, so their self memory is exactly that.
  const KeyAverages k = prof.key_averages();
  const FunctionEventAvg* alloc_row = row(k, "memhook_allocating");
  const FunctionEventAvg* free_row = row(k, "memhook_freeing");
  ASSERT_NE(alloc_row, nullptr);
  ASSERT_NE(free_row, nullptr);
  EXPECT_EQ(alloc_row->self_cpu_memory_usage, new_bytes + malloc_bytes);
  EXPECT_EQ(free_row->self_cpu_memory_usage, -(new_bytes + malloc_bytes));
  expect_one_chain(r);
}

TEST(MemHook, TotalsStartFromTheHeapInUseAndMoveByTheReportedBytes) {
  // A block from before the window, large enough that glibc maps it: freed in the window, it
  // is reported with its size and must not drive the total below zero.
  constexpr std::size_t kOld = 4 << 20;
  void* old_block = std::malloc(kOld);
  escape(old_block);
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  std::free(old_block);
  std::vector<void*> blocks;
  blocks.reserve(64);
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(std::malloc(static_cast<std::size_t>(100 + 37 * i)));
    escape(blocks.back());
  }
  for (std::size_t i = 0; i < blocks.size(); i += 2) std::free(blocks[i]);
  prof.stop();
  for (std::size_t i = 1; i < blocks.size(); i += 2) std::free(blocks[i]);

  const ProfilerResult& r = prof.result();
  const std::vector<const Event*> at = events_at(r, old_block);
  ASSERT_GE(at.size(), 1u);
  EXPECT_EQ(use_of(r, *at[0]).action, MemoryAction::kFree);
  EXPECT_LE(use_of(r, *at[0]).bytes, -static_cast<std::int64_t>(kOld));
  const auto [start, end] = expect_one_chain(r);
  // The window started with the old block in use, so the count it started from holds it.
  EXPECT_GE(start, static_cast<std::int64_t>(kOld));
  EXPECT_GE(end, 0);
}

TEST(MemHook, EveryAllocationFunctionIsReported) {
  struct Case {
    const char* what;
    std::size_t min_bytes;
    std::function<void*()> allocate;
    std::function<void(void*)> release;
  };
  const auto c_free = [](void* p) { std::free(p); };
  const std::vector<Case> cases = {
      {"malloc", 100, [] { return std::malloc(100); }, c_free},
      {"calloc", 120, [] { return std::calloc(3, 40); }, c_free},
      {"realloc(nullptr)", 90, [] { return std::realloc(nullptr, 90); }, c_free},
      {"posix_memalign", 200,
       [] {
         void* p = nullptr;
         return ::posix_memalign(&p, 64, 200) == 0 ? p : nullptr;
       },
       c_free},
      {"aligned_alloc", 256, [] { return std::aligned_alloc(128, 256); }, c_free},
      {"memalign", 300, [] { return ::memalign(256, 300); }, c_free},
      {"valloc", 10, [] { return ::valloc(10); }, c_free},
      {"new", 400, [] { return static_cast<void*>(new char[400]); },
       [](void* p) { delete[] static_cast<char*>(p); }},
      {"new(nothrow)", 410, [] { return ::operator new(410, std::nothrow); },
       [](void* p) { ::operator delete(p, std::nothrow); }},
      {"new(align)", 500, [] { return ::operator new(500, std::align_val_t(256)); },
       [](void* p) { ::operator delete(p, 500, std::align_val_t(256)); }},
      {"new[](align, nothrow)", 520,
       [] { return ::operator new[](520, std::align_val_t(64), std::nothrow); },
       [](void* p) { ::operator delete[](p, std::align_val_t(64), std::nothrow); }},
      {"sized delete", 600, [] { return ::operator new(600); },
       [](void* p) { ::operator delete(p, 600); }},
  };
  std::vector<void*> blocks(cases.size());
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    blocks[i] = cases[i].allocate();
    escape(blocks[i]);
  }
  for (std::size_t i = 0; i < cases.size(); ++i) cases[i].release(blocks[i]);
  prof.stop();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ASSERT_NE(blocks[i], nullptr) << cases[i].what;
    expect_alloc_then_free(prof.result(), blocks[i], cases[i].min_bytes, cases[i].what);
  }
  // The aligned forms really are aligned.
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks[4]) % 128, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks[9]) % 256, 0u);
  expect_one_chain(prof.result());
}

TEST(MemHook, ReallocIsAFreeOfTheOldBlockAndAnAllocationOfTheNew) {
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  void* small = std::malloc(64);
  escape(small);
  // Far larger: glibc moves it (the new block is mmapped).
  void* big = std::realloc(small, 1 << 20);
  escape(big);
  // Smaller again, within the same mapping or not: either way a free and an allocation.
  void* shrunk = std::realloc(big, 1 << 19);
  escape(shrunk);
  // realloc(p, 0) frees.
  void* gone = std::realloc(shrunk, 0);
  prof.stop();
  EXPECT_EQ(gone, nullptr);
  ASSERT_NE(small, big);
  const ProfilerResult& r = prof.result();

  std::vector<std::pair<std::uint64_t, std::int64_t>> seen;  // (address, bytes) in time order
  std::vector<const Event*> mem = memory_events(r);
  std::stable_sort(mem.begin(), mem.end(),
                   [](const Event* a, const Event* b) { return a->start_ns < b->start_ns; });
  for (const Event* e : mem) {
    const MemoryUse& m = use_of(r, *e);
    const auto addr = m.address;
    if (addr == reinterpret_cast<std::uint64_t>(small) ||
        addr == reinterpret_cast<std::uint64_t>(big) ||
        addr == reinterpret_cast<std::uint64_t>(shrunk)) {
      seen.emplace_back(addr, m.bytes);
    }
  }
  ASSERT_EQ(seen.size(), 6u);
  const auto small_addr = reinterpret_cast<std::uint64_t>(small);
  const auto big_addr = reinterpret_cast<std::uint64_t>(big);
  const auto shrunk_addr = reinterpret_cast<std::uint64_t>(shrunk);
  EXPECT_EQ(seen[0].first, small_addr);
  EXPECT_GE(seen[0].second, 64);
  EXPECT_EQ(seen[1], std::make_pair(small_addr, -seen[0].second));  // the old block freed
  EXPECT_EQ(seen[2].first, big_addr);                               // then the new one
  EXPECT_GE(seen[2].second, 1 << 20);
  EXPECT_EQ(seen[3], std::make_pair(big_addr, -seen[2].second));
  EXPECT_EQ(seen[4].first, shrunk_addr);
  EXPECT_GE(seen[4].second, 1 << 19);
  EXPECT_EQ(seen[5], std::make_pair(shrunk_addr, -seen[4].second));
  expect_one_chain(r);
}

TEST(MemHook, CategoryScopesApplyToHookedAllocations) {
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  char* p = nullptr;
  {
    MemoryCategoryScope category(MemoryCategory::kActivation);
    p = new char[700];
    escape(p);
  }
  delete[] p;
  prof.stop();
  const std::vector<const Event*> at = events_at(prof.result(), p);
  ASSERT_GE(at.size(), 2u);
  EXPECT_EQ(use_of(prof.result(), *at[0]).category, MemoryCategory::kActivation);
  EXPECT_EQ(use_of(prof.result(), *at[1]).category, MemoryCategory::kUnknown);
}

TEST(MemHook, NothingIsReportedWithoutProfileMemoryOrOutsideASession) {
  {
    Profiler prof;  // a session, but without profile_memory
    prof.start();
    {
      OPSCOPE_RECORD_FUNCTION("memhook_no_lens");
      char* p = new char[1000];
      escape(p);
      delete[] p;
      void* m = std::malloc(1000);
      escape(m);
      std::free(m);
    }
    prof.stop();
    EXPECT_FALSE(memory_profiling_enabled());
    EXPECT_TRUE(memory_events(prof.result()).empty());
    const KeyAverages k = prof.key_averages();
    EXPECT_NE(row(k, "memhook_no_lens"), nullptr);
  }
  // Between sessions: nothing is recorded, so a block allocated then and freed in the next
  // window shows only its free (a pre-existing block to the memory timeline).
  EXPECT_FALSE(memory_profiling_enabled());
  void* between = std::malloc(2000);
  escape(between);
  Profiler prof({.lenses = {.profile_memory = true}});
  prof.start();
  std::free(between);
  prof.stop();
  const std::vector<const Event*> at = events_at(prof.result(), between);
  ASSERT_GE(at.size(), 1u);
  EXPECT_EQ(use_of(prof.result(), *at[0]).action, MemoryAction::kFree);
}

// Ranges that fill several chunks of buffer while memory is profiled: taking a chunk
// allocates (the thread's chunk list grows), and that allocation must not be reported from
// inside the collector, which holds the buffer's lock then.
TEST(MemHook, ManyRangesWhileProfilingMemoryDoNotDeadlock) {
  run_in_child([] {
    Profiler prof({.lenses = {.profile_memory = true}});
    prof.start();
    constexpr int kRanges = 300'000;  // about 9 MiB of buffer: a dozen chunk changes
    for (int i = 0; i < kRanges; ++i) {
      OPSCOPE_RECORD_FUNCTION("memhook_tiny");
      if (i % 1000 == 0) {
        char* p = new char[64];
        escape(p);
        delete[] p;
      }
    }
    prof.stop();
    const KeyAverages k = prof.key_averages();
    const FunctionEventAvg* tiny = row(k, "memhook_tiny");
    ASSERT_NE(tiny, nullptr);
    EXPECT_EQ(tiny->count, kRanges);
    EXPECT_EQ(prof.stats().events_dropped, 0u);
    EXPECT_GE(memory_events(prof.result()).size(), 2u * (kRanges / 1000));
    expect_one_chain(prof.result());
  });
}

// A stack is captured straight into the thread's buffer. The first capture on a thread looks
// up its stack bounds, which allocates: that allocation's report must not land in the middle
// of the stack being written (it did, and the stack read 0x0;0x0;...). Each thread here is
// new, so each range is its thread's first capture.
TEST(MemHook, TheFirstStackOfAThreadIsWholeWhileReportingAllocations) {
  run_in_child([] {
    Profiler prof({.lenses = {.profile_memory = true, .with_stack = true}});
    prof.start();
    for (int t = 0; t < 8; ++t) {
      std::thread([] {
        OPSCOPE_RECORD_FUNCTION("first_on_its_thread");
        char* p = new char[64];
        escape(p);
        delete[] p;
      }).join();
    }
    prof.stop();
    int checked = 0;
    for (const Event& e : prof.result().events()) {
      if (e.name != "first_on_its_thread") continue;
      const EventDetail* d = prof.result().detail(e);
      ASSERT_NE(d, nullptr);
      ASSERT_GE(d->stack, 0);
      const auto& frames = prof.result().stacks()[static_cast<std::size_t>(d->stack)];
      ASSERT_FALSE(frames.empty());
      for (const StackFrame& f : frames) {
        EXPECT_TRUE(f.pc != 0 || !f.label.empty()) << "a 0x0 frame";
      }
      ++checked;
    }
    EXPECT_EQ(checked, 8);
    EXPECT_GE(memory_events(prof.result()).size(), 16u);
  });
}

TEST(MemHook, ThreadsAllocateConcurrently) {
  run_in_child([] {
    constexpr int kThreads = 4;
    constexpr int kIterations = 5000;
    Profiler prof({.lenses = {.profile_memory = true}});
    prof.start();
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&go, t] {
        while (!go.load()) std::this_thread::yield();
        // Each thread's first event is a range: the thread registers (and allocates) from
        // the range's path, not from a report's. More ranges than reports, so that ranges
        // too fill chunks.
        for (int i = 0; i < kIterations; ++i) {
          OPSCOPE_RECORD_FUNCTION("memhook_worker");
          for (int k = 0; k < 8; ++k) {
            OPSCOPE_RECORD_FUNCTION("memhook_worker_step");
          }
          auto* p = new std::uint64_t[static_cast<std::size_t>(1 + (i + t) % 50)];
          escape(p);
          void* m = std::malloc(static_cast<std::size_t>(16 + 8 * ((i * 7 + t) % 100)));
          escape(m);
          std::free(m);
          delete[] p;
        }
      });
    }
    go = true;
    for (std::thread& th : threads) th.join();
    prof.stop();
    const ProfilerResult& r = prof.result();
    EXPECT_EQ(prof.stats().events_dropped, 0u);
    const KeyAverages k = prof.key_averages();
    const FunctionEventAvg* worker = row(k, "memhook_worker");
    ASSERT_NE(worker, nullptr);
    EXPECT_EQ(worker->count, kThreads * kIterations);
    // Every allocation made in a worker range is freed in the same range.
    EXPECT_EQ(worker->self_cpu_memory_usage, 0);
    // Per thread and address, allocations and frees alternate and balance.
    std::map<std::pair<std::int32_t, std::uint64_t>, std::int64_t> live;
    std::size_t in_workers = 0;
    for (const Event* e : memory_events(r)) {
      if (parent_name(r, *e) != "memhook_worker") continue;
      ++in_workers;
      const MemoryUse& m = use_of(r, *e);
      std::int64_t& bytes = live[{e->thread, m.address}];
      if (m.bytes > 0) {
        EXPECT_EQ(bytes, 0);
        bytes = m.bytes;
      } else {
        EXPECT_EQ(bytes, -m.bytes);
        bytes = 0;
      }
    }
    EXPECT_EQ(in_workers, 4u * kThreads * kIterations);
    for (const auto& [key, bytes] : live) EXPECT_EQ(bytes, 0);
    expect_one_chain(r);
    // Each OS thread is registered once, however its first event came.
    std::map<std::uint64_t, int> per_tid;
    for (const ThreadInfo& info : r.threads()) EXPECT_EQ(++per_tid[info.tid], 1) << info.tid;
  });
}

// The hook preloaded into programs that know nothing of opscope: its weak references stay
// null and it only forwards to glibc.
std::pair<int, std::string> run_preloaded(const std::string& command) {
  const std::string line =
      std::string("LD_PRELOAD=") + OPSCOPE_MEMHOOK_LIBRARY + " " + command + " 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  return {::pclose(pipe), out};
}

TEST(MemHook, PreloadedIntoAProgramWithoutOpscopeIsInert) {
  const auto [true_status, true_out] = run_preloaded("/bin/true");
  EXPECT_EQ(true_status, 0) << true_out;
  EXPECT_EQ(true_out, "");

  // A shell pipeline allocates a good deal (sort holds its input).
  const auto [sh_status, sh_out] = run_preloaded("/bin/sh -c 'seq 1 20000 | sort -n | tail -1'");
  EXPECT_EQ(sh_status, 0) << sh_out;
  EXPECT_EQ(sh_out, "20000\n");

  if (::access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 to preload into";
  }
  const auto [py_status, py_out] = run_preloaded(
      "/usr/bin/python3 -c 'import json; print(len(json.dumps([str(i) * 3 for i in "
      "range(100000)])))'");
  EXPECT_EQ(py_status, 0) << py_out;
  EXPECT_EQ(py_out, "1866670\n");
}

}  // namespace
}  // namespace opscope

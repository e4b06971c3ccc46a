// Many threads, deep nesting, threads created and ended during the session: every range must
// come back exactly once, properly nested, on the thread that recorded it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "opscope/profiler.h"
#include "opscope/record_function.h"

namespace opscope {
namespace stress_test {

constexpr int kDepth = 4;
constexpr char kLevelNames[kDepth][8] = {"level0", "level1", "level2", "level3"};

// One "iteration" of nested ranges: level0 { level1 { level2 { level3 } } }, with a dynamic
// name at the innermost level every 16th time.
void nested(int i) {
  static constexpr CallSite sites[kDepth] = {
      {kLevelNames[0], "nested", __FILE__, __LINE__},
      {kLevelNames[1], "nested", __FILE__, __LINE__},
      {kLevelNames[2], "nested", __FILE__, __LINE__},
      {kLevelNames[3], "nested", __FILE__, __LINE__}};
  RecordFunction r0(sites[0], RecordScope::kFunction);
  RecordFunction r1(sites[1], RecordScope::kFunction);
  RecordFunction r2(sites[2], RecordScope::kUserScope);
  if (i % 16 == 0) {
    RecordFunction r3(std::string("dynamic_") + std::to_string(i % 64), RecordScope::kFunction);
  } else {
    RecordFunction r3(sites[3], RecordScope::kFunction);
  }
}

TEST(Stress, FourThreadsHundredThousandNestedRangesEach) {
  constexpr int kLongThreads = 4;
  constexpr int kIterations = 25'000;  // 4 ranges each: 100 k ranges per thread
  constexpr int kShortThreads = 16;     // created and ended while the session runs
  constexpr int kShortIterations = 500;

  Profiler prof;
  prof.start();
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> long_tids(kLongThreads);
  for (int t = 0; t < kLongThreads; ++t) {
    threads.emplace_back([&, t] {
      long_tids[static_cast<std::size_t>(t)] = static_cast<std::uint64_t>(::gettid());
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kIterations; ++i) nested(i);
    });
  }
  go = true;
  for (int s = 0; s < kShortThreads; ++s) {
    std::thread([] {
      for (int i = 0; i < kShortIterations; ++i) nested(i);
    }).join();
  }
  for (auto& t : threads) t.join();
  prof.stop();

  const ProfilerResult& r = prof.result();
  EXPECT_EQ(r.stats().events_dropped, 0u);

  // Exact counts per thread and per level.
  std::map<std::uint64_t, std::map<std::string, int>> per_thread;
  for (const Event& e : r.events()) {
    const std::uint64_t tid = r.threads()[static_cast<std::size_t>(e.thread)].tid;
    std::string name(e.name);
    if (name.starts_with("dynamic_")) name = "dynamic";
    ++per_thread[tid][name];
  }
  int short_threads_seen = 0;
  for (const auto& [tid, counts] : per_thread) {
    const bool is_long = std::find(long_tids.begin(), long_tids.end(), tid) != long_tids.end();
    const int iterations = is_long ? kIterations : kShortIterations;
    const int dynamic = (iterations + 15) / 16;
    EXPECT_EQ(counts.at("level0"), iterations) << tid;
    EXPECT_EQ(counts.at("level1"), iterations) << tid;
    EXPECT_EQ(counts.at("level2"), iterations) << tid;
    EXPECT_EQ(counts.at("level3"), iterations - dynamic) << tid;
    EXPECT_EQ(counts.at("dynamic"), dynamic) << tid;
    if (!is_long) ++short_threads_seen;
  }
  // Thread ids may be reused by the kernel after a thread exits; each short thread still has
  // its own buffer, so count buffers (result threads) rather than ids.
  // The main thread records nothing (no schedule, so no step range).
  EXPECT_EQ(static_cast<int>(r.threads().size()), kLongThreads + kShortThreads);
  EXPECT_GE(short_threads_seen, 1);

  // Proper nesting: every level-k range's parent is a level-(k-1) range on the same thread
  // that contains it; level0 ranges are roots.
  const auto level_of = [](std::string_view name) {
    if (name.starts_with("dynamic_")) return 3;
    for (int k = 0; k < kDepth; ++k) {
      if (name == kLevelNames[k]) return k;
    }
    return -1;
  };
  std::size_t checked = 0;
  for (const Event& e : r.events()) {
    const int level = level_of(e.name);
    if (level < 0) continue;
    ++checked;
    if (level == 0) {
      EXPECT_EQ(e.parent, -1);
      continue;
    }
    ASSERT_GE(e.parent, 0);
    const Event& p = r.events()[static_cast<std::size_t>(e.parent)];
    ASSERT_EQ(level_of(p.name), level - 1);
    EXPECT_EQ(p.thread, e.thread);
    EXPECT_LE(p.start_ns, e.start_ns);
    EXPECT_GE(p.end_ns, e.end_ns);
  }
  EXPECT_EQ(checked, static_cast<std::size_t>((kLongThreads * kIterations +
                                               kShortThreads * kShortIterations) * kDepth));
}

TEST(Stress, SessionsStartAndStopWhileThreadsRecord) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      int i = 0;
      while (!stop.load(std::memory_order_relaxed)) nested(i++);
    });
  }
  for (int s = 0; s < 50; ++s) {
    Profiler prof;
    prof.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    prof.stop();
    // Every recorded range is complete. Ranges that began before start() or ended after stop()
    // are not recorded, so per thread the levels' counts differ by at most one iteration at
    // each end of the window.
    std::map<std::int32_t, std::array<int, kDepth>> per_thread;
    for (const Event& e : prof.result().events()) {
      EXPECT_GE(e.end_ns, e.start_ns);
      for (int k = 0; k < kDepth; ++k) {
        if (e.name == kLevelNames[k] || (k == 3 && e.name.starts_with("dynamic_"))) {
          ++per_thread[e.thread][static_cast<std::size_t>(k)];
        }
      }
    }
    for (const auto& [thread, counts] : per_thread) {
      for (int k = 1; k < kDepth; ++k) {
        EXPECT_LE(std::abs(counts[static_cast<std::size_t>(k)] - counts[0]), 2) << "session " << s;
      }
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
}

// Windows that each fill several chunks, back to back: chunks recycled at one drain (while
// their threads live on) are handed out again in the next window, and no window sees another
// window's ranges.
TEST(Stress, ConsecutiveLargeWindowsReuseBuffersExactly) {
  constexpr int kSteps = 6;
  constexpr int kPerStep = 150'000;  // > 2 large chunks per thread per window
  std::vector<int> per_window;
  ::testing::internal::CaptureStderr();  // warmup=0 warns
  Profiler prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1}),
                 .on_trace_ready = [&](Profiler& p) {
                   int n = 0;
                   for (const Event& e : p.events()) n += e.name == "bulk";
                   per_window.push_back(n);
                   EXPECT_EQ(p.stats().events_dropped, 0u);
                 }});
  ::testing::internal::GetCapturedStderr();
  prof.start();
  for (int step = 0; step < kSteps; ++step) {
    std::thread worker([] {
      for (int i = 0; i < kPerStep; ++i) {
        OPSCOPE_RECORD_FUNCTION("bulk");
      }
    });
    for (int i = 0; i < kPerStep; ++i) {
      OPSCOPE_RECORD_FUNCTION("bulk");
    }
    worker.join();
    prof.step();
  }
  prof.stop();
  // One window per step, plus the last (empty) step's window at stop().
  ASSERT_EQ(per_window.size(), static_cast<std::size_t>(kSteps + 1));
  for (int w = 0; w < kSteps; ++w) EXPECT_EQ(per_window[static_cast<std::size_t>(w)], 2 * kPerStep);
  EXPECT_EQ(per_window.back(), 0);
}

}  // namespace stress_test
}  // namespace opscope

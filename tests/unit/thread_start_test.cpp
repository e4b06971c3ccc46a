// util::start_thread_beside runs its body on a new thread that ends up with its creator's
// affinity, whichever of the two (the creator moving it off its core, the thread starting)
// happens first.
#include "util/thread_start.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace opscope::util {
namespace thread_start_test {

cpu_set_t affinity_of(pthread_t thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(thread, sizeof(set), &set), 0);
  return set;
}

TEST(ThreadStart, RunsTheBodyOnItsOwnThread) {
  std::atomic<bool> ran{false};
  std::thread::id id;
  std::thread t = start_thread_beside([&] {
    id = std::this_thread::get_id();
    ran = true;
  });
  const std::thread::id started = t.get_id();
  t.join();
  EXPECT_TRUE(ran);
  EXPECT_EQ(id, started);
  EXPECT_NE(id, std::this_thread::get_id());
}

TEST(ThreadStart, TheBodyKeepsWhatItCaptured) {
  auto owned = std::make_unique<std::string>("kept");
  std::string seen;
  std::thread t = start_thread_beside([&seen, p = std::move(owned)] { seen = *p; });
  t.join();
  EXPECT_EQ(seen, "kept");
}

// Whoever comes second gives the thread its creator's affinity back: checked once both have
// had their turn (the creator's is over when start_thread_beside returns, the thread's before
// its body runs), many times, so that both orders occur.
TEST(ThreadStart, TheThreadEndsWithItsCreatorsAffinity) {
  const cpu_set_t creator = affinity_of(pthread_self());
  for (int i = 0; i < 200; ++i) {
    std::atomic<bool> returned{false};
    cpu_set_t seen;
    CPU_ZERO(&seen);
    std::thread t = start_thread_beside([&] {
      while (!returned.load()) std::this_thread::yield();
      seen = affinity_of(pthread_self());
    });
    returned = true;
    t.join();
    ASSERT_TRUE(CPU_EQUAL(&seen, &creator))
        << "round " << i << ": the thread was left with " << CPU_COUNT(&seen)
        << " of the creator's " << CPU_COUNT(&creator) << " cores";
  }
}

// Each order in turn, driven by hand: the creator moves the thread off its core before the
// thread says it runs, and after.
TEST(ThreadStart, EitherOrderGivesTheAffinityBack) {
  const cpu_set_t creator = affinity_of(pthread_self());
  if (CPU_COUNT(&creator) < 2) GTEST_SKIP() << "one core allowed: nothing is moved";
  for (const bool placed_first : {true, false}) {
    auto placement = thread_start_detail::away_from_this_core();
    ASSERT_NE(placement, nullptr);
    std::atomic<int> turn{0};
    cpu_set_t seen;
    CPU_ZERO(&seen);
    std::thread t([&] {
      while (placed_first && turn.load() != 1) std::this_thread::yield();
      thread_start_detail::started(*placement);
      turn = 2;
      while (turn.load() != 3) std::this_thread::yield();
      seen = affinity_of(pthread_self());
    });
    if (!placed_first) {
      while (turn.load() != 2) std::this_thread::yield();
    }
    thread_start_detail::place(*placement, t);
    if (placed_first) {
      turn = 1;
      while (turn.load() != 2) std::this_thread::yield();
    }
    turn = 3;
    t.join();
    EXPECT_TRUE(CPU_EQUAL(&seen, &creator))
        << (placed_first ? "moved, then started" : "started, then moved") << ": left with "
        << CPU_COUNT(&seen) << " of " << CPU_COUNT(&creator) << " cores";
  }
}

// A creator restricted to one core has no other to start the thread on: it starts beside it
// all the same, on that core.
TEST(ThreadStart, ACreatorOnOneCoreStartsItAllTheSame) {
  const cpu_set_t creator = affinity_of(pthread_self());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  cpu_set_t seen;
  CPU_ZERO(&seen);
  std::thread t = start_thread_beside([&] { seen = affinity_of(pthread_self()); });
  t.join();
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(creator), &creator), 0);
  EXPECT_TRUE(CPU_EQUAL(&seen, &one));
}

}  // namespace thread_start_test
}  // namespace opscope::util

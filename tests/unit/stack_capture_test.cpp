// capture_stack (src/record/stack_capture.h): the frames it returns, in order, with both
// unwinders; max and skip; deep, threaded and foreign-stack captures.
#include "record/stack_capture.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "analysis/symbolizer.h"
#include "support/unwinder_guard.h"

// Outside namespace opscope so that the symbolized names are unambiguous.
namespace opscope_stack_test {

using opscope::record::capture_stack;
using opscope::record::kMaxStackFrames;

// What one capture saw, with the return addresses each level knows about itself: level_c's
// own return address is the frame after the one into level_c, and so on.
struct Capture {
  std::array<std::uint64_t, 2 * kMaxStackFrames> words{};
  std::size_t n = 0;
  std::uint64_t into_b = 0;       // level_c's return address: into level_b
  std::uint64_t into_a = 0;       // level_b's: into level_a
  std::uint64_t into_caller = 0;  // level_a's: into the test
};

struct Request {
  std::size_t max = kMaxStackFrames;
  std::size_t skip = 0;
};

// Something after every call, so that no call is a tail call (which would drop a frame).
inline void keep_frame() { asm volatile("" ::: "memory"); }

inline std::uint64_t return_address(void* p) { return reinterpret_cast<std::uint64_t>(p); }

// noipa: not inlined, cloned or merged with a look-alike, so each level is a frame of its own
// with its own name.
[[gnu::noipa]] void level_c(Capture& c, Request r) {
  c.into_b = return_address(__builtin_return_address(0));
  c.n = capture_stack(c.words.data(), r.max, r.skip, /*with_modules=*/false);
  keep_frame();
}

[[gnu::noipa]] void level_b(Capture& c, Request r) {
  c.into_a = return_address(__builtin_return_address(0));
  level_c(c, r);
  keep_frame();
}

[[gnu::noipa]] void level_a(Capture& c, Request r) {
  c.into_caller = return_address(__builtin_return_address(0));
  level_b(c, r);
  keep_frame();
}

[[gnu::noipa]] Capture capture_abc(Request r = {}) {
  Capture c;
  level_a(c, r);
  keep_frame();
  return c;
}

// capture_abc with unwinder `u`, always from this one call site, so that the two unwinders'
// captures can be compared frame for frame one level further out.
[[gnu::noipa]] Capture capture_with(opscope::record::Unwinder u, Request r = {}) {
  const opscope::record::Unwinder before = opscope::record::unwinder();
  opscope::record::set_unwinder(u);
  Capture c = capture_abc(r);
  opscope::record::set_unwinder(before);
  keep_frame();
  return c;
}

// Recurses `depth` times, then captures: a stack deeper than any max.
[[gnu::noipa]] void recurse(Capture& c, int depth, Request r) {
  if (depth == 0) {
    c.n = capture_stack(c.words.data(), r.max, r.skip, false);
  } else {
    recurse(c, depth - 1, r);
  }
  keep_frame();
}

}  // namespace opscope_stack_test

namespace opscope {
namespace stack_capture_test {

using opscope_stack_test::Capture;
using opscope_stack_test::capture_abc;
using record::capture_stack;
using record::kMaxStackFrames;
using record::Unwinder;

using opscope::testing::UnwinderGuard;

std::vector<std::uint64_t> words_of(const Capture& c) {
  return {c.words.begin(), c.words.begin() + static_cast<std::ptrdiff_t>(c.n)};
}

std::string function_of(analysis::Symbolizer& s, std::uint64_t pc) {
  return s.resolve(pc).function;
}

// The four innermost frames are level_c, level_b, level_a and capture_abc, exactly the
// return addresses those functions see for themselves.
void expect_abc_chain(const Capture& c, const char* unwinder) {
  SCOPED_TRACE(unwinder);
  ASSERT_GE(c.n, 4u);
  EXPECT_EQ(c.words[1], c.into_b);
  EXPECT_EQ(c.words[2], c.into_a);
  EXPECT_EQ(c.words[3], c.into_caller);
  analysis::Symbolizer s;
  if (!analysis::Symbolizer::reads_debug_info()) return;  // names of static functions need libdw
  EXPECT_EQ(function_of(s, c.words[0]).rfind("opscope_stack_test::level_c(", 0), 0u)
      << function_of(s, c.words[0]);
  EXPECT_EQ(function_of(s, c.words[1]).rfind("opscope_stack_test::level_b(", 0), 0u)
      << function_of(s, c.words[1]);
  EXPECT_EQ(function_of(s, c.words[2]).rfind("opscope_stack_test::level_a(", 0), 0u)
      << function_of(s, c.words[2]);
  EXPECT_EQ(function_of(s, c.words[3]).rfind("opscope_stack_test::capture_abc(", 0), 0u)
      << function_of(s, c.words[3]);
}

TEST(StackCapture, FramePointerWalkReturnsTheCallersInnermostFirst) {
  UnwinderGuard fp(Unwinder::kFramePointers);
  const Capture c = capture_abc();
  expect_abc_chain(c, "frame pointers");
  // The walk goes on through the test's own frames, at least as far as this test function.
  EXPECT_GT(c.n, 5u);
  EXPECT_LT(c.n, kMaxStackFrames);  // and ends where the chain ends, not at the limit
}

TEST(StackCapture, DwarfUnwinderReturnsTheSameFrames) {
  const Capture fp = opscope_stack_test::capture_with(Unwinder::kFramePointers);
  const Capture dwarf = opscope_stack_test::capture_with(Unwinder::kDwarf);
  expect_abc_chain(dwarf, "dwarf");
  // The same return addresses through capture_with (the frame after it returns into this
  // test, from two different call sites).
  ASSERT_GE(dwarf.n, 6u);
  ASSERT_GE(fp.n, 6u);
  EXPECT_EQ(std::vector<std::uint64_t>(dwarf.words.begin(), dwarf.words.begin() + 5),
            std::vector<std::uint64_t>(fp.words.begin(), fp.words.begin() + 5));
  EXPECT_NE(dwarf.words[5], fp.words[5]);
  analysis::Symbolizer s;
  if (analysis::Symbolizer::reads_debug_info()) {
    for (const Capture* c : {&fp, &dwarf}) {
      EXPECT_NE(function_of(s, c->words[5]).find("DwarfUnwinderReturnsTheSameFrames"),
                std::string::npos)
          << function_of(s, c->words[5]);
    }
  }
}

TEST(StackCapture, SkipLeavesOutInnermostFrames) {
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    const Capture all = capture_abc();
    const Capture skipped = capture_abc({.skip = 2});
    ASSERT_GE(skipped.n, 2u);
    EXPECT_EQ(skipped.words[0], all.into_a);  // level_c and the frame into level_b are gone
    EXPECT_EQ(skipped.words[1], all.into_caller);
    EXPECT_EQ(skipped.n + 2, all.n);
    // Skipping more frames than there are gives an empty stack, not garbage.
    EXPECT_EQ(capture_abc({.skip = 10'000}).n, 0u);
  }
}

TEST(StackCapture, MaxKeepsTheInnermostFrames) {
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    const Capture all = capture_abc();
    for (std::size_t max : {1u, 2u, 3u}) {
      const Capture c = capture_abc({.max = max});
      ASSERT_EQ(c.n, max);
      EXPECT_EQ(c.words[max], 0u);  // nothing written past max
      EXPECT_EQ(std::vector<std::uint64_t>(c.words.begin(), c.words.begin() + max),
                std::vector<std::uint64_t>(all.words.begin(), all.words.begin() + max));
    }
    const Capture none = capture_abc({.max = 0});
    EXPECT_EQ(none.n, 0u);
    EXPECT_EQ(none.words[0], 0u);
  }
}

TEST(StackCapture, DeepStacksStopAtMax) {
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    constexpr int kMax = static_cast<int>(kMaxStackFrames);
    for (int depth : {kMax - 2, kMax * 4, 5000}) {
      SCOPED_TRACE(depth);
      Capture c;
      c.words.fill(0);
      opscope_stack_test::recurse(c, depth, {.max = kMaxStackFrames});
      ASSERT_EQ(c.n, kMaxStackFrames);
      EXPECT_EQ(c.words[kMaxStackFrames], 0u);  // bounded by max
      // Frame 0 returns into the call of capture_stack, frames 1.. into the recursive call:
      // all the same address.
      for (int i = 2; i < std::min(depth, kMax); ++i) {
        ASSERT_EQ(c.words[i], c.words[1]) << i;
      }
    }
  }
}

TEST(StackCapture, WorksOnEveryThread) {
  const Capture main_thread = capture_abc();
  for (Unwinder u : {Unwinder::kFramePointers, Unwinder::kDwarf}) {
    UnwinderGuard guard(u);
    std::vector<Capture> captures(4);
    std::vector<std::thread> threads;
    for (Capture& c : captures) {
      // Many captures per thread, so the threads overlap; the last one is kept.
      threads.emplace_back([&c] {
        for (int i = 0; i < 200; ++i) c = capture_abc();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Capture& c : captures) {
      expect_abc_chain(c, u == Unwinder::kDwarf ? "dwarf, thread" : "frame pointers, thread");
      // The same call sites as on the main thread, up to the caller of capture_abc.
      EXPECT_EQ(
          std::vector<std::uint64_t>(c.words.begin(), c.words.begin() + 4),
          std::vector<std::uint64_t>(main_thread.words.begin(), main_thread.words.begin() + 4));
      EXPECT_LT(c.n, kMaxStackFrames);  // a thread's stack is short: the walk ends by itself
    }
  }
}

// A signal handler on an alternate stack: the frame-pointer walker sees that its frame is
// not on the thread's stack and captures nothing rather than reading outside it.
Capture g_in_handler;
void capture_in_handler(int) { g_in_handler = capture_abc(); }

TEST(StackCapture, FramePointerWalkStaysOnTheThreadsStack) {
  UnwinderGuard fp(Unwinder::kFramePointers);
  std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  stack_t old_ss{};
  ASSERT_EQ(sigaltstack(&ss, &old_ss), 0);
  struct sigaction sa {};
  sa.sa_handler = capture_in_handler;
  sa.sa_flags = SA_ONSTACK;
  struct sigaction old_sa {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_sa), 0);
  capture_abc();  // the thread's stack bounds are looked up here, not in the handler
  g_in_handler.n = 99;
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old_sa, nullptr);
  sigaltstack(&old_ss, nullptr);
  EXPECT_EQ(g_in_handler.n, 0u);
}

TEST(StackCapture, UnwinderNamesFromTheEnvironment) {
  EXPECT_EQ(record::unwinder_named(nullptr), Unwinder::kFramePointers);
  EXPECT_EQ(record::unwinder_named(""), Unwinder::kFramePointers);
  EXPECT_EQ(record::unwinder_named("fp"), Unwinder::kFramePointers);
  EXPECT_EQ(record::unwinder_named("frame_pointers"), Unwinder::kFramePointers);
  EXPECT_EQ(record::unwinder_named("dwarf"), Unwinder::kDwarf);
  EXPECT_EQ(record::unwinder_named("DWARF"), Unwinder::kDwarf);
  EXPECT_EQ(record::unwinder_named("libunwind"), Unwinder::kFramePointers);  // unknown: default
}

TEST(StackCapture, SetUnwinderIsSeenByTheNextCapture) {
  const Unwinder before = record::unwinder();
  record::set_unwinder(Unwinder::kDwarf);
  EXPECT_EQ(record::unwinder(), Unwinder::kDwarf);
  record::set_unwinder(Unwinder::kFramePointers);
  EXPECT_EQ(record::unwinder(), Unwinder::kFramePointers);
  record::set_unwinder(before);
}

}  // namespace stack_capture_test
}  // namespace opscope

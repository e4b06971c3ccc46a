#include "opscope/record_function.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "opscope/internal/clock.h"
#include "opscope/internal/collector.h"
#include "opscope/profiler.h"

namespace opscope {
namespace record_function_test {

// Finds the only event named `name`; fails the test if there is not exactly one.
const Event& only(const ProfilerResult& r, std::string_view name) {
  const Event* found = nullptr;
  int n = 0;
  for (const Event& e : r.events()) {
    if (e.name == name) {
      found = &e;
      ++n;
    }
  }
  EXPECT_EQ(n, 1) << name;
  static const Event none;
  return found ? *found : none;
}

TEST(RecordFunction, InactiveWithoutSession) {
  OPSCOPE_RECORD_FUNCTION("nobody_listens");
  RecordFunction rf("dynamic");
  EXPECT_FALSE(rf.is_active());
  EXPECT_EQ(rf.handle(), 0u);
  EXPECT_TRUE(rf.name().empty());
  EXPECT_EQ(rf.sequence_nr(), -1);
}

TEST(RecordFunction, RecordsNameScopeTimesAndNesting) {
  Profiler prof;
  prof.start();
  std::uint64_t outer_handle = 0;
  {
    OPSCOPE_USER_SCOPE("outer");
    {
      RecordFunction inner("inner", RecordScope::kFunction);
      ASSERT_TRUE(inner.is_active());
      EXPECT_EQ(inner.name(), "inner");
      EXPECT_NE(inner.handle(), 0u);
      EXPECT_EQ(inner.thread_id(), static_cast<std::uint64_t>(::gettid()));
    }
    { OPSCOPE_BACKWARD_FUNCTION("inner_backward"); }
  }
  prof.stop();
  const ProfilerResult& r = prof.result();
  const Event& outer = only(r, "outer");
  const Event& inner = only(r, "inner");
  const Event& backward = only(r, "inner_backward");
  outer_handle = outer.handle;
  EXPECT_EQ(outer.scope, RecordScope::kUserScope);
  EXPECT_EQ(inner.scope, RecordScope::kFunction);
  EXPECT_EQ(backward.scope, RecordScope::kBackwardFunction);
  ASSERT_NE(outer.site, nullptr);
  EXPECT_STREQ(outer.site->file, __FILE__);
  EXPECT_EQ(inner.site, nullptr);  // dynamic name
  EXPECT_LE(outer.start_ns, inner.start_ns);
  EXPECT_LE(inner.end_ns, backward.start_ns);
  EXPECT_LE(backward.end_ns, outer.end_ns);
  EXPECT_EQ(&r.events()[static_cast<std::size_t>(inner.parent)], &outer);
  EXPECT_EQ(&r.events()[static_cast<std::size_t>(backward.parent)], &outer);
  EXPECT_EQ(outer.self_ns, outer.duration_ns() - inner.duration_ns() - backward.duration_ns());
  EXPECT_NE(inner.handle, outer_handle);
  EXPECT_EQ(r.threads()[static_cast<std::size_t>(outer.thread)].tid,
            static_cast<std::uint64_t>(::gettid()));
}

TEST(RecordFunction, TwoPhaseFormAndSequenceLinks) {
  Profiler prof;
  prof.start();
  std::uint64_t forward_tid = 0;
  {
    RecordFunction fwd(RecordScope::kFunction);
    fwd.before("aten::mul", /*sequence_nr=*/42);
    forward_tid = fwd.thread_id();
  }
  {
    RecordFunction bwd(RecordScope::kBackwardFunction);
    bwd.before("MulBackward0");
    bwd.set_sequence_nr(42);
    bwd.set_forward_thread_id(forward_tid);
    EXPECT_EQ(bwd.sequence_nr(), 42);
  }
  prof.stop();
  const Event& fwd = only(prof.result(), "aten::mul");
  const Event& bwd = only(prof.result(), "MulBackward0");
  EXPECT_EQ(fwd.sequence_nr, 42);
  EXPECT_EQ(fwd.forward_thread_id, 0u);
  EXPECT_EQ(bwd.sequence_nr, 42);
  EXPECT_EQ(bwd.forward_thread_id, forward_tid);
}

TEST(RecordFunction, EndsOnAnotherThreadAsAsyncRange) {
  Profiler prof;
  prof.start();
  auto rf = std::make_unique<RecordFunction>("async_work", RecordScope::kUserScope);
  const std::uint64_t begin_tid = rf->thread_id();
  std::thread([&] { rf->end(); }).join();
  rf->end();  // a second end does nothing
  prof.stop();
  const Event& e = only(prof.result(), "async_work");
  EXPECT_EQ(e.kind, EventKind::kAsyncRange);
  EXPECT_EQ(prof.result().threads()[static_cast<std::size_t>(e.thread)].tid, begin_tid);
  EXPECT_EQ(e.parent, -1);
  EXPECT_GE(e.end_ns, e.start_ns);
}

TEST(RecordFunction, RangeStartedBeforeSessionIsNotRecorded) {
  auto early = std::make_unique<RecordFunction>("early");
  Profiler prof;
  prof.start();
  early.reset();
  prof.stop();
  for (const Event& e : prof.result().events()) EXPECT_NE(e.name, "early");
}

TEST(RecordFunction, NamesAreKeptIntact) {
  const std::string tricky = "quote\" back\\slash \x01 tab\t \xE2\x9C\x93 \xF0\x9F\x94\xA5";
  Profiler prof;
  prof.start();
  { RecordFunction rf(tricky); }
  prof.stop();
  EXPECT_EQ(only(prof.result(), tricky).name, tricky);
}

// A plain range takes one 16-byte slot of its thread's buffer (opscope/internal/collector.h):
// the 64 KiB first chunk, all a 64 KiB budget grants, holds about 4,000 of them (2,000 at 32
// bytes a range), and each keeps its call site and the handle it had while it ran.
TEST(RecordFunction, PlainRangesTakeSixteenBytesAndKeepTheirSitesAndHandles) {
  static constexpr CallSite kSite{"compact", __func__, __FILE__, __LINE__};
  ProfilerConfig config;
  config.experimental.buffer_limit_bytes = 64 << 10;
  Profiler prof(config);
  prof.start();
  std::vector<std::uint64_t> handles;
  handles.reserve(10'000);
  for (int i = 0; i < 10'000; ++i) {
    RecordFunction rf(kSite, RecordScope::kUserScope);
    handles.push_back(rf.handle());
  }
  prof.stop();
  EXPECT_NE(kSite.compact_index, 0u);
  std::vector<std::uint64_t> recorded;
  for (const Event& e : prof.result().events()) {
    if (e.name != "compact") continue;
    EXPECT_EQ(e.site, &kSite);
    EXPECT_EQ(e.scope, RecordScope::kUserScope);
    EXPECT_EQ(e.kind, EventKind::kRange);
    recorded.push_back(e.handle);
  }
  EXPECT_GT(recorded.size(), 4000u);
  ASSERT_LE(recorded.size(), handles.size());
  // The buffer keeps the first ranges; ordered by start, as their handles were taken.
  for (std::size_t i = 0; i < recorded.size(); ++i) ASSERT_EQ(recorded[i], handles[i]) << i;
}

// A compact range counts its start from its chunk's first tick: one that began before the
// chunk it ends in was taken (an outer range around more ranges than a chunk holds), or that
// lasted 2^32 ticks or more, is written whole, with its true times.
TEST(RecordFunction, RangesThatDoNotFitSixteenBytesKeepTheirTimes) {
  static constexpr CallSite kLong{"longer_than_2^32_ticks", __func__, __FILE__, __LINE__};
  Profiler prof;
  prof.start();
  {
    OPSCOPE_USER_SCOPE("outer");
    for (int i = 0; i < 20'000; ++i) {  // past the 64 KiB first chunk (4,000 ranges)
      OPSCOPE_RECORD_FUNCTION("inner");
    }
  }
  // A range that ends 2^33 ticks after it began (at least 1.7 s on a 5 GHz counter).
  const std::uint32_t epoch = internal::t_ctx.epoch;
  ASSERT_NE(epoch, 0u);
  const std::uint64_t start = internal::ticks();
  const std::uint64_t end = start + (1ull << 33);
  internal::append_range(
      start, end, internal::take_range_id(internal::t_ctx), internal::t_ctx.slot,
      internal::compact_tag(internal::register_call_site(kLong), false, 0), epoch, [&] {
        return internal::make_record(start, end, reinterpret_cast<std::uintptr_t>(&kLong), 0,
                                     internal::t_ctx.slot, 0, internal::RecordKind::kRange,
                                     internal::kNameSite);
      });
  prof.stop();
  const ProfilerResult& r = prof.result();
  const Event& outer = only(r, "outer");
  std::int64_t last_inner_end = 0;
  int inner = 0;
  for (const Event& e : r.events()) {
    if (e.name != "inner") continue;
    ++inner;
    EXPECT_GE(e.start_ns, outer.start_ns);
    last_inner_end = std::max(last_inner_end, e.end_ns);
    EXPECT_EQ(&r.events()[static_cast<std::size_t>(e.parent)], &outer);
  }
  EXPECT_EQ(inner, 20'000);
  EXPECT_GE(outer.end_ns, last_inner_end);
  EXPECT_GT(only(r, "longer_than_2^32_ticks").duration_ns(), 1'500'000'000);
}

// Threads that meet a new call site at once give it one index, and every range keeps it.
TEST(RecordFunction, ACallSiteMetByManyThreadsAtOnceGetsOneIndex) {
  static constexpr CallSite kShared{"shared_site", __func__, __FILE__, __LINE__};
  Profiler prof;
  prof.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) RecordFunction rf(kShared, RecordScope::kFunction);
    });
  }
  for (auto& t : threads) t.join();
  prof.stop();
  int n = 0;
  for (const Event& e : prof.result().events()) {
    if (e.name != "shared_site") continue;
    ++n;
    EXPECT_EQ(e.site, &kShared);
  }
  EXPECT_EQ(n, 4000);
  EXPECT_NE(kShared.compact_index, 0u);
}

TEST(RecordFunction, ScopeNames) {
  EXPECT_EQ(scope_name(RecordScope::kFunction), "FUNCTION");
  EXPECT_EQ(scope_name(RecordScope::kBackwardFunction), "BACKWARD_FUNCTION");
  EXPECT_EQ(scope_name(RecordScope::kUserScope), "USER_SCOPE");
}

}  // namespace record_function_test
}  // namespace opscope

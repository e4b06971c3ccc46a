#include "opscope/record_function.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "opscope/profiler.h"

namespace opscope {
namespace {

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

TEST(RecordFunction, ScopeNames) {
  EXPECT_EQ(scope_name(RecordScope::kFunction), "FUNCTION");
  EXPECT_EQ(scope_name(RecordScope::kBackwardFunction), "BACKWARD_FUNCTION");
  EXPECT_EQ(scope_name(RecordScope::kUserScope), "USER_SCOPE");
}

}  // namespace
}  // namespace opscope

// ProfilerResult::Builder::finish() orders events by thread, start, longer first, handle,
// whatever order they were added in: in the order a recorder adds them (nested ranges end
// children first), in no order at all (importers), and with long ranges spanning everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "opscope/result.h"

namespace opscope {
namespace {

using Key = std::tuple<std::int32_t, std::int64_t, std::int64_t, std::uint64_t>;

Key expected_key(const Event& e) { return {e.thread, e.start_ns, -e.end_ns, e.handle}; }

// Adds a tree of ranges in the order they end (children first), as a thread's buffer holds
// them. Returns the end of the subtree.
std::int64_t add_post_order(ProfilerResult::Builder& b, std::int32_t thread, std::int64_t start,
                            int depth, int fanout, std::uint64_t& handle) {
  std::int64_t t = start + 1;
  if (depth > 0) {
    for (int c = 0; c < fanout; ++c) {
      t = add_post_order(b, thread, t, depth - 1, fanout, handle) + 1;
    }
  }
  Event e;
  e.name = "range";
  e.start_ns = start;
  e.end_ns = t + 1;
  e.thread = thread;
  e.handle = ++handle;
  b.add_event(e);
  return e.end_ns;
}

void expect_ordered_and_complete(const ProfilerResult& r, std::size_t count) {
  ASSERT_EQ(r.events().size(), count);
  std::vector<Key> keys;
  for (const Event& e : r.events()) keys.push_back(expected_key(e));
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  std::vector<std::uint64_t> handles;
  for (const Event& e : r.events()) handles.push_back(e.handle);
  std::sort(handles.begin(), handles.end());
  EXPECT_EQ(std::adjacent_find(handles.begin(), handles.end()), handles.end());  // none lost
}

TEST(ResultOrder, SortsRangesAddedInTheOrderTheyEnded) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});
  std::uint64_t handle = 0;
  std::int64_t t = 1000;
  for (int step = 0; step < 50; ++step) t = add_post_order(b, step % 2, t, 3, 3, handle) + 5;
  const auto r = b.finish();
  expect_ordered_and_complete(*r, handle);
  // Nesting follows from the order: every root holds 3 children.
  const Event& root = r->events()[0];
  EXPECT_EQ(root.parent, -1);
  int children = 0;
  for (const Event& e : r->events()) children += e.parent == 0;
  EXPECT_EQ(children, 3);
}

TEST(ResultOrder, SortsEventsAddedInRandomOrder) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});
  b.add_thread({3, "c"});
  std::mt19937_64 rng(7);
  std::vector<Event> events;
  for (std::uint64_t h = 1; h <= 20'000; ++h) {
    Event e;
    e.name = "x";
    e.thread = static_cast<std::int32_t>(rng() % 3);
    e.start_ns = static_cast<std::int64_t>(rng() % 5000);  // many equal starts
    e.end_ns = e.start_ns + static_cast<std::int64_t>(rng() % 50);
    e.handle = h;
    events.push_back(e);
  }
  for (const Event& e : events) b.add_event(e);
  expect_ordered_and_complete(*b.finish(), events.size());
}

TEST(ResultOrder, SortsWindowLongRangesThatEndLast) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  std::uint64_t handle = 0;
  std::int64_t t = 100;
  for (int i = 0; i < 5000; ++i) t = add_post_order(b, 0, t, 1, 2, handle) + 1;
  // Three ranges enclosing all of the above, ended last (innermost first).
  for (int outer = 0; outer < 3; ++outer) {
    Event e;
    e.name = "outer";
    e.start_ns = 10 + outer;
    e.end_ns = t + 10 - outer;
    e.handle = ++handle;
    b.add_event(e);
  }
  const auto r = b.finish();
  expect_ordered_and_complete(*r, handle);
  EXPECT_EQ(r->events()[0].name, "outer");
  EXPECT_EQ(r->events()[2].parent, 1);
}

}  // namespace
}  // namespace opscope

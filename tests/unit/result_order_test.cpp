// ProfilerResult::Builder::finish() orders events by thread, start, longer first, handle,
// whatever order they were added in: in the order a recorder adds them (nested ranges end
// children first), in no order at all (importers), with long ranges spanning everything, and
// for the CPU events of real traces PyTorch wrote (../shared/peers/kineto-traces).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "opscope/result.h"
#include "support/test_support.h"

namespace opscope {
namespace result_order_test {

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

// Kineto writes a thread's operators by start, then its runtime calls by start: with the
// threads interleaved, each thread's events are a few long sorted runs (finish() merges them).
// Runs here share starts and whole spans (ties go to the longer event, then the handle), nest
// across runs, and come in odd numbers; one thread's runs are too short to merge. The result
// must be the one the same events give added in a random order.
TEST(ResultOrder, SortsThreadsThatComeAsAFewLongRuns) {
  std::mt19937_64 rng(5);
  std::vector<Event> events;
  std::uint64_t handle = 0;
  const auto add = [&](std::int32_t thread, std::int64_t start, std::int64_t end) {
    Event e;
    e.name = "x";
    e.thread = thread;
    e.start_ns = start;
    e.end_ns = end;
    e.handle = ++handle;
    events.push_back(e);
  };
  const int runs_of[] = {2, 3, 5, 40};  // thread 3: runs of about 10 events, left to insertion
  for (int run = 0; run < 40; ++run) {
    for (std::int32_t thread = 0; thread < 4; ++thread) {
      if (run >= runs_of[thread]) continue;
      const int length = thread == 3 ? 10 : 400;
      std::int64_t t = 1000 * run % 3000;  // runs overlap in time
      for (int i = 0; i < length; ++i) {
        t += static_cast<std::int64_t>(rng() % 3);  // equal starts within and across runs
        const std::int64_t dur = static_cast<std::int64_t>(rng() % 4) * 5;  // whole spans repeat
        add(thread, t, t + dur);
      }
    }
  }
  const auto build_from = [&](const std::vector<Event>& order) {
    ProfilerResult::Builder b;
    for (int t = 0; t < 4; ++t) b.add_thread({static_cast<std::uint64_t>(t + 1), "t"});
    for (const Event& e : order) b.add_event(e);
    return b.finish();
  };
  const auto as_written = build_from(events);
  expect_ordered_and_complete(*as_written, events.size());
  std::vector<Event> shuffled = events;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(3));
  const auto from_shuffled = build_from(shuffled);
  ASSERT_EQ(from_shuffled->events().size(), as_written->events().size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& a = as_written->events()[i];
    const Event& b = from_shuffled->events()[i];
    ASSERT_EQ(std::tie(a.handle, a.parent, a.first_child, a.next_sibling, a.self_ns),
              std::tie(b.handle, b.parent, b.first_child, b.next_sibling, b.self_ns))
        << "event " << i;
  }
}

// reserve() has the events' pages mapped from their far end on a second thread while they are
// added; a reserve that proves short moves the events mid-way, which must stop that thread
// first (ASan and TSan runs of this test would see it touch freed memory). Nesting is checked
// on every tree: each root holds 3 children, each of those 3, down to 81 leaves.
TEST(ResultOrder, EventsAddedPastTheirReserveWhileTheirPagesAreMapped) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});
  b.reserve(100'000);  // 10 MB: mapped on a second thread
  std::uint64_t handle = 0;
  std::int64_t t = 1000;
  int trees = 0;
  for (; handle < 300'000; ++trees) t = add_post_order(b, trees % 2, t, 4, 3, handle) + 5;
  const auto r = b.finish();
  expect_ordered_and_complete(*r, handle);
  int roots = 0;
  for (std::size_t i = 0; i < r->events().size(); ++i) {
    const Event& e = r->events()[i];
    int children = 0;
    for (const std::int32_t child : r->children(i)) {
      EXPECT_EQ(r->events()[static_cast<std::size_t>(child)].parent, static_cast<std::int32_t>(i));
      ++children;
    }
    if (e.parent < 0) {
      ++roots;
      EXPECT_EQ(children, 3);
    }
    if (children == 0) EXPECT_EQ(e.self_ns, e.duration_ns());
  }
  EXPECT_EQ(roots, trees);
}

// A reserve larger than the events (it counts a recorder's slots, and a range that is not
// compact takes two) has its pages mapped by a second thread; those past the last event are
// given back at finish().
TEST(ResultOrder, PagesReservedPastTheLastEventAreGivenBack) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: nothing is mapped ahead";
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.reserve(400'000);  // 42 MB, mapped from its end on a second thread
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it map the far end
  std::uint64_t handle = 0;
  std::int64_t t = 1000;
  while (handle < 100'000) t = add_post_order(b, 0, t, 2, 3, handle) + 5;
  const auto r = b.finish();
  expect_ordered_and_complete(*r, handle);
  const std::vector<Event>& events = r->events();
  ASSERT_GE(events.capacity(), 400'000u);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin =
      (reinterpret_cast<std::uintptr_t>(events.data() + events.size()) + page - 1) & ~(page - 1);
  const auto end =
      reinterpret_cast<std::uintptr_t>(events.data() + events.capacity()) & ~(page - 1);
  std::vector<unsigned char> in((end - begin) / page);
  ASSERT_EQ(::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()), 0);
  std::size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  EXPECT_EQ(resident, 0u) << "of " << in.size() << " pages past the last event";
}

// Self time is the duration less the children's, never below 0: children that overlap
// (clock skew, ranges ended out of order) can claim more than their parent lasted. Checked on
// a builder used a second time, after a result whose threads were interleaved.
TEST(ResultOrder, SelfTimeNeverGoesBelowZeroAndABuilderCanBeReused) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});
  const auto add = [&](std::int32_t thread, std::int64_t start, std::int64_t end,
                       std::uint64_t handle) {
    Event e;
    e.name = "r";
    e.thread = thread;
    e.start_ns = start;
    e.end_ns = end;
    e.handle = handle;
    b.add_event(e);
  };
  add(1, 0, 10, 1);
  add(0, 0, 10, 2);
  b.add_flow("ac2g", 1, {0, 5}, {1, 5});
  expect_ordered_and_complete(*b.finish(), 2);  // freed here, with its kept texts
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});

  add(0, 0, 60, 11);    // child, ended first
  add(0, 40, 100, 12);  // overlaps it: also a child of the parent
  add(0, 0, 100, 10);   // parent: 100 - 60 - 60 < 0
  add(1, 5, 20, 21);    // a lone range on the other thread, still open at the end
  b.add_flow("ac2g", 2, {0, 50}, {1, 10});
  const auto r = b.finish();
  expect_ordered_and_complete(*r, 4);
  std::map<std::uint64_t, const Event*> by_handle;
  for (const Event& e : r->events()) by_handle[e.handle] = &e;
  EXPECT_EQ(by_handle[10]->self_ns, 0);
  EXPECT_EQ(by_handle[11]->self_ns, 60);
  EXPECT_EQ(by_handle[12]->self_ns, 60);
  EXPECT_EQ(by_handle[12]->parent, by_handle[11]->parent);
  EXPECT_EQ(by_handle[21]->self_ns, 15);
  ASSERT_EQ(r->flows().size(), 1u);  // its category kept again, not the freed result's text
  EXPECT_EQ(r->flows()[0].category, "ac2g");
  EXPECT_EQ(r->flows()[0].id, 2);
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

// The host-side ranges of a real Kineto trace (ops, annotations, runtime calls), one thread per
// (pid, tid), in nanoseconds; the handle is the event's position in the file.
std::vector<Event> real_trace_ranges(const std::string& path, int* threads) {
  const auto doc = nlohmann::json::parse(opscope::testing::read_gzip_file(path));
  const auto& all = doc.is_array() ? doc : doc.at("traceEvents");
  std::map<std::pair<std::int64_t, std::int64_t>, std::int32_t> thread_of;
  std::vector<Event> out;
  std::uint64_t handle = 0;
  for (const auto& e : all) {
    ++handle;
    if (e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", "");
    if (cat != "cpu_op" && cat != "user_annotation" && cat != "python_function" &&
        cat != "cuda_runtime") {
      continue;
    }
    const auto id = [](const nlohmann::json& v) {
      return v.is_string() ? std::int64_t(std::hash<std::string>{}(v.get<std::string>()))
                           : v.get<std::int64_t>();
    };
    const auto key = std::make_pair(id(e.at("pid")), id(e.at("tid")));
    const auto [it, added] = thread_of.emplace(key, static_cast<std::int32_t>(thread_of.size()));
    Event ev;
    ev.name = "x";
    ev.thread = it->second;
    ev.start_ns = std::llround(e.at("ts").get<double>() * 1000.0);
    ev.end_ns = ev.start_ns + std::llround(e.value("dur", 0.0) * 1000.0);
    ev.handle = handle;
    out.push_back(ev);
  }
  *threads = static_cast<int>(thread_of.size());
  return out;
}

std::shared_ptr<const ProfilerResult> build(const std::vector<Event>& events, int threads) {
  ProfilerResult::Builder b;
  for (int t = 0; t < threads; ++t) b.add_thread({static_cast<std::uint64_t>(t + 1), "t"});
  b.reserve(events.size());
  for (const Event& e : events) b.add_event(e);
  return b.finish();
}

// The same events in three orders: as the file lists them, as a recorder's buffers would
// (by end time, children first), and shuffled. Each result must be ordered, hold every event
// once, nest each event inside its parent on its thread, and be identical to the others.
TEST(ResultOrder, RealKinetoTracesSortTheSameFromAnyOrder) {
  const std::filesystem::path peers = OPSCOPE_PEERS_DIR "/kineto-traces";
  const char* files[] = {"trace_filter/sampled_rank-0.json.gz",
                         "trace_filter/sampled_rank-1.json.gz",
                         "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                         "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                         "execution_trace/benchmark_simple_add_trace.json.gz"};
  for (const char* file : files) {
    SCOPED_TRACE(file);
    if (!std::filesystem::exists(peers / file)) {
      GTEST_SKIP() << (peers / file) << " is missing: the real traces live in ../shared/peers";
    }
    int threads = 0;
    std::vector<Event> events = real_trace_ranges((peers / file).string(), &threads);
    ASSERT_GT(events.size(), 50u);

    const auto in_file_order = build(events, threads);
    std::stable_sort(events.begin(), events.end(),
                     [](const Event& a, const Event& b) { return a.end_ns < b.end_ns; });
    const auto in_end_order = build(events, threads);
    std::shuffle(events.begin(), events.end(), std::mt19937_64(11));
    const auto shuffled = build(events, threads);

    expect_ordered_and_complete(*in_file_order, events.size());
    int nested = 0;
    for (const Event& e : in_file_order->events()) {
      if (e.parent < 0) continue;
      const Event& p = in_file_order->events()[static_cast<std::size_t>(e.parent)];
      EXPECT_EQ(p.thread, e.thread);
      EXPECT_LE(p.start_ns, e.start_ns);
      EXPECT_GE(p.end_ns, e.end_ns);
      ++nested;
    }
    EXPECT_GT(nested, 0);  // the traces hold nested ops
    for (const auto* other : {in_end_order.get(), shuffled.get()}) {
      ASSERT_EQ(other->events().size(), in_file_order->events().size());
      for (std::size_t i = 0; i < other->events().size(); ++i) {
        const Event& a = in_file_order->events()[i];
        const Event& b = other->events()[i];
        ASSERT_EQ(std::tie(a.handle, a.parent, a.first_child, a.next_sibling, a.self_ns),
                  std::tie(b.handle, b.parent, b.first_child, b.next_sibling, b.self_ns))
            << "event " << i;
      }
    }
  }
}

}  // namespace result_order_test
}  // namespace opscope

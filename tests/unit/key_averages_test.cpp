// key_averages(): grouping a ProfilerResult's events into rows.
#include "opscope/key_averages.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "opscope/error.h"
#include "opscope/result.h"
#include "support/test_support.h"

namespace opscope {
namespace key_averages_test {

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;  // ns since the epoch
constexpr std::int64_t kUs = 1000;

Event event(std::string_view name, std::int32_t thread, std::int64_t start_us, std::int64_t end_us,
            EventKind kind = EventKind::kRange) {
  Event e;
  e.name = name;
  e.thread = thread;
  e.start_ns = kBase + start_us * kUs;
  e.end_ns = kBase + end_us * kUs;
  e.kind = kind;
  return e;
}

// Two threads with known nesting (times in us):
//
//   main    step [0,100)               step [200,250)
//             aten::mm [10,40)            aten::add [210,220)
//               aten::empty [12,15)
//             aten::add [50,60)
//             aten::mm [70,90)
//   worker  load [5,95)                prefetch [100,300), async
//             aten::empty [10,20)
//             aten::mm [30,60)         mark @40, instant
//             aten::add [70,80)       (a copied name: same text, another pointer)
std::shared_ptr<const ProfilerResult> two_threads() {
  ProfilerResult::Builder b;
  std::int32_t main = b.add_thread({101, "main"});
  std::int32_t worker = b.add_thread({102, "worker"});
  // Added out of order on purpose: finish() sorts by thread, then start.
  b.add_event(event("prefetch", worker, 100, 300, EventKind::kAsyncRange));
  b.add_event(event("load", worker, 5, 95));
  b.add_event(event("aten::empty", worker, 10, 20));
  b.add_event(event("aten::mm", worker, 30, 60));
  b.add_event(event("mark", worker, 40, 40, EventKind::kInstant));
  b.add_event(event(b.keep("aten::add"), worker, 70, 80));
  b.add_event(event("step", main, 0, 100));
  b.add_event(event("aten::mm", main, 10, 40));
  b.add_event(event("aten::empty", main, 12, 15));
  b.add_event(event("aten::add", main, 50, 60));
  b.add_event(event("aten::mm", main, 70, 90));
  b.add_event(event("step", main, 200, 250));
  b.add_event(event("aten::add", main, 210, 220));
  return b.finish();
}

TEST(KeyAverages, CountsTotalsAndSelfTimesInFirstSeenOrder) {
  auto result = two_threads();
  KeyAverages avg = key_averages(*result);
  struct Expected {
    const char* key;
    std::int64_t count, total_us, self_us;
    bool is_async, top_level;
  };
  const Expected expected[] = {
      {"step", 2, 150, 80, false, true},      // 100 - 30 - 10 - 20, 50 - 10
      {"aten::mm", 3, 80, 77, false, false},  // 30 - 3, 20, 30
      {"aten::empty", 2, 13, 13, false, false},
      {"aten::add", 3, 30, 30, false, false},  // both name pointers in one row
      {"load", 1, 90, 40, false, true},        // 90 - 10 - 30 - 10
      {"prefetch", 1, 200, 200, true, true},
  };
  ASSERT_EQ(avg.rows().size(), std::size(expected));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    const FunctionEventAvg& r = avg.rows()[i];
    SCOPED_TRACE(expected[i].key);
    EXPECT_EQ(r.key, expected[i].key);
    EXPECT_EQ(r.count, expected[i].count);
    EXPECT_EQ(r.cpu_time_total_ns, expected[i].total_us * kUs);
    EXPECT_EQ(r.self_cpu_time_total_ns, expected[i].self_us * kUs);
    EXPECT_EQ(r.is_async, expected[i].is_async);
    EXPECT_EQ(r.top_level, expected[i].top_level);
    EXPECT_EQ(r.input_shapes, "");
    EXPECT_TRUE(r.stack.empty());
    EXPECT_EQ(r.node_id, -1);
  }
  EXPECT_FALSE(avg.profile_memory);
  EXPECT_FALSE(avg.with_flops);
}

// The golden was checked by hand: self CPU total 440 us; step 80/440 = 18.18 %, CPU total
// 150/440 = 34.09 %, avg 75 us; the async prefetch shows "0" for its CPU total share.
TEST(KeyAverages, TableGolden) {
  auto result = two_threads();
  std::string golden =
      testing::read_file(std::string(OPSCOPE_GOLDEN_DIR) + "/table_key_averages.txt");
  EXPECT_EQ(key_averages(*result).table(), golden);
  EXPECT_EQ(key_averages(*result).table({.sort_by = "self_cpu_time_total", .row_limit = 2}),
            testing::read_file(std::string(OPSCOPE_GOLDEN_DIR) + "/table_key_averages_sorted.txt"));
}

TEST(KeyAverages, GroupingWithoutRecordedShapesOrStacksKeepsRowsByName) {
  auto result = two_threads();
  EXPECT_EQ(key_averages(*result, true, 3).rows().size(), 6u);
  EXPECT_THROW(key_averages(*result, false, -1), Error);
  const std::string message = testing::error_of([&] { key_averages(*result, false, -2); });
  EXPECT_NE(message.find("group_by_stack_n"), std::string::npos) << message;
  EXPECT_NE(message.find("-2"), std::string::npos) << message;
}

TEST(KeyAverages, EmptyAndInstantOnlyResults) {
  ProfilerResult::Builder empty;
  auto none = empty.finish();
  EXPECT_TRUE(key_averages(*none).rows().empty());
  EXPECT_EQ(key_averages(*none).table(), "");

  ProfilerResult::Builder marks;
  std::int32_t t = marks.add_thread({1, "t"});
  marks.add_event(event("mark", t, 1, 1, EventKind::kInstant));
  auto only_marks = marks.finish();
  EXPECT_TRUE(key_averages(*only_marks).rows().empty());
}

TEST(KeyAverages, ManyNamesAndPointersGrowTheTable) {
  // 5000 distinct texts, each under two pointers: exercises rehashing and the text merge.
  ProfilerResult::Builder b;
  std::int32_t t = b.add_thread({1, "t"});
  std::vector<std::string_view> first, second;
  for (int i = 0; i < 5000; ++i) first.push_back(b.keep("op" + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) second.push_back(b.keep("op" + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) {
    b.add_event(event(first[static_cast<std::size_t>(i)], t, 10 * i, 10 * i + 2));
    b.add_event(event(second[static_cast<std::size_t>(4999 - i)], t, 10 * i + 5, 10 * i + 6));
  }
  auto result = b.finish();
  KeyAverages avg = key_averages(*result);
  ASSERT_EQ(avg.rows().size(), 5000u);
  for (std::size_t i = 0; i < 5000; ++i) {
    const FunctionEventAvg& r = avg.rows()[i];
    // First seen: op0, op4999, op1, op4998, ... each once under each pointer.
    std::size_t n = i % 2 == 0 ? i / 2 : 4999 - i / 2;
    ASSERT_EQ(r.key, "op" + std::to_string(n));
    EXPECT_EQ(r.count, 2);
    EXPECT_EQ(r.cpu_time_total_ns, 3 * kUs);
  }
}

}  // namespace key_averages_test
}  // namespace opscope

// End to end: ranges recorded on several threads by a real Profiler, exported as a Chrome
// trace (.json and .json.gz), parsed back with an independent JSON parser, and checked event
// by event against the result they came from.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "opscope/opscope.h"
#include "support/test_support.h"

namespace opscope {
namespace trace_roundtrip_test {

void workload(int thread_index) {
  OPSCOPE_USER_SCOPE("worker_loop");
  for (int i = 0; i < 50; ++i) {
    OPSCOPE_RECORD_FUNCTION("aten::mm");
    RecordFunction dynamic("op \"" + std::to_string(thread_index) + "\" \\ \t\xE2\x9C\x93");
    { OPSCOPE_BACKWARD_FUNCTION("MmBackward0"); }
  }
}

TEST(TraceRoundTrip, EveryRecordedEventComesBackExactly) {
  testing::TempDir dir;
  Profiler prof;
  prof.start();
  prof.add_metadata("run", "round \"trip\"");
  prof.add_metadata_json("config", R"({"lr": 0.1, "layers": [64, 128]})");
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(wrap([t] { workload(t); }));
  workload(99);
  for (auto& t : threads) t.join();
  prof.stop();
  const ProfilerResult& r = prof.result();

  for (const std::string file : {"trace.json", "trace.json.gz"}) {
    const std::string path = dir.file(file);
    prof.export_chrome_trace(path);
    const std::string text = file.ends_with(".gz") ? testing::read_gzip_file(path)
                                                   : testing::read_file(path);
    const auto doc = nlohmann::json::parse(text);

    EXPECT_EQ(doc["run"], "round \"trip\"");
    EXPECT_EQ(doc["config"]["layers"][1], 128);
    EXPECT_EQ(doc["opscope"]["events_recorded"], r.events().size());
    EXPECT_EQ(doc["opscope"]["events_dropped"], 0);
    const std::int64_t base = doc["baseTimeNanoseconds"];
    EXPECT_EQ(base, r.start_time_ns());

    // Index the trace's complete events by (tid, handle).
    std::map<std::pair<std::uint64_t, std::uint64_t>, nlohmann::json> by_key;
    std::map<std::uint64_t, std::string> thread_names;
    for (const auto& e : doc["traceEvents"]) {
      ASSERT_TRUE(e["pid"].is_number_integer()) << e.dump();
      ASSERT_TRUE(e["tid"].is_number_integer()) << e.dump();
      if (e["ph"] == "X") {
        by_key[{e["tid"].get<std::uint64_t>(), e["args"]["External id"].get<std::uint64_t>()}] = e;
      } else if (e["ph"] == "M" && e["name"] == "thread_name") {
        thread_names[e["tid"]] = e["args"]["name"];
      }
    }
    ASSERT_EQ(by_key.size(), r.events().size());
    for (const Event& ev : r.events()) {
      const std::uint64_t tid = r.threads()[static_cast<std::size_t>(ev.thread)].tid;
      const auto it = by_key.find({tid, ev.handle});
      ASSERT_NE(it, by_key.end()) << ev.name;
      const auto& e = it->second;
      EXPECT_EQ(e["name"].get<std::string>(), ev.name);
      EXPECT_EQ(e["pid"], r.pid());
      EXPECT_EQ(e["cat"], ev.scope == RecordScope::kUserScope ? "user_annotation" : "cpu_op");
      // Microseconds relative to the base with three decimals: nanoseconds survive.
      EXPECT_EQ(std::llround(e["ts"].get<double>() * 1000), ev.start_ns - base) << ev.name;
      EXPECT_EQ(std::llround(e["dur"].get<double>() * 1000), ev.duration_ns()) << ev.name;
      EXPECT_EQ(e["args"]["Record function id"], ev.handle);
    }
    EXPECT_EQ(thread_names.size(), r.threads().size());
  }
}

}  // namespace trace_roundtrip_test
}  // namespace opscope

// The reader's rule for times (src/import/trace_times.h): a "ts" or "dur" that is not a
// finite number of microseconds within ±(2^62 - 1) ns, or an end (ts + dur) past that, is
// refused with the file, the byte of the value, the event and the value as written: by
// read_trace() whatever the options leave out, and by `opscope analyze` (all reports, or
// temporal alone), `analyze diff` and `merge` in the same words. Times within the rule are
// accepted, and sums over many of them (which can pass INT64_MAX) are exact where a report
// prints a double, saturated where the API holds an int64.
//
// Every input is made here, from one small valid trace with an event of each kind, by
// writing an extreme value into one event's "ts" or "dur".
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "import/trace_times.h"
#include "opscope/key_averages.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace trace_times_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::kCli;
using tests::scratch;

// One event of the generated trace: its text is head + "ts" + (dur) + tail.
struct Ev {
  const char* kind;  // what the test calls it
  const char* name;  // its "name", which a refusal names
  std::string head;  // the fields before "ts"
  std::string ts;
  std::string dur;   // "" for none
  std::string tail;  // the fields after, with the closing brace
};

// A small valid trace with an event of each kind: a profiler step, a CPU op, a runtime call,
// a kernel, a copy, a counter, an instant and a flow's two ends.
std::vector<Ev> base_events() {
  return {
      {"step", "ProfilerStep#1", R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":10,"tid":10,)",
       "1000", "900", "}"},
      {"cpu_op", "aten::mm", R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":10,)", "1010",
       "100", R"(,"args":{"External id":1}})"},
      {"runtime", "cudaLaunchKernel",
       R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,)", "1020", "10",
       R"(,"args":{"correlation":7,"External id":1}})"},
      {"kernel", "gemm_kernel", R"({"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,)", "1040",
       "50", R"(,"args":{"device":0,"stream":7,"correlation":7,"External id":1}})"},
      {"memcpy", "Memcpy HtoD", R"({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":7,)",
       "1100", "20", R"(,"args":{"device":0,"stream":7,"correlation":8,"bytes":1024}})"},
      {"counter", "a counter", R"({"ph":"C","name":"a counter","pid":10,"tid":10,)", "1200", "",
       R"(,"args":{"value":1}})"},
      {"instant", "a marker", R"({"ph":"i","cat":"cpu_instant_event","name":"a marker","pid":10,"tid":10,)",
       "1300", "", R"(,"s":"t"})"},
      {"flow", "ac2g", R"({"ph":"s","cat":"ac2g","name":"ac2g","id":7,"pid":10,"tid":10,)", "1020", "",
       R"(,"bp":"e"})"},
      {"flow_end", "ac2g", R"({"ph":"f","cat":"ac2g","name":"ac2g","id":7,"pid":0,"tid":7,)", "1040", "",
       R"(,"bp":"e"})"},
  };
}

std::string event_text(const Ev& e) {
  std::string out = e.head + "\"ts\":" + e.ts;
  if (!e.dur.empty()) out += ",\"dur\":" + e.dur;
  return out + e.tail;
}

// The trace's text; `padding` CPU ops first (a file past 1 MiB is read in pieces on two
// threads, so that the byte offsets of a later piece are checked too).
std::string trace_text(const std::vector<Ev>& events, int padding = 0) {
  std::string out = R"({"schemaVersion":1,"distributedInfo":{"rank":0},"traceEvents":[)";
  for (int i = 0; i < padding; ++i) {
    out += R"({"ph":"X","cat":"cpu_op","name":"aten::pad","pid":10,"tid":11,"ts":)" +
           std::to_string(1000 + i) + R"(,"dur":1},)" + "\n";
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    out += (i == 0 ? "" : ",\n") + event_text(events[i]);
  }
  return out + "]}\n";
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch("trace_times_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string read_error(const std::string& path, const TraceReadOptions& options = {}) {
  return testing::error_of([&] { read_traces(std::vector<std::string>{path}, 2, options); });
}

// What `opscope analyze --report temporal` keeps (the least a read keeps).
TraceReadOptions least() {
  TraceReadOptions o;
  o.cpu_range_args = false;
  o.flows = false;
  o.cpu_ranges = false;
  o.other_args = false;
  return o;
}

TEST(TraceTimes, TheRuleOnTheTextOfOneTime) {
  using import::kTimeLimitNs;
  using import::read_time;
  using import::TimeVerdict;
  EXPECT_EQ(kTimeLimitNs, 4611686018427387903);
  std::int64_t ns = 0;
  EXPECT_EQ(read_time("4611686018427387.903", ns), TimeVerdict::kOk);
  EXPECT_EQ(ns, kTimeLimitNs);
  EXPECT_EQ(read_time("-4611686018427387.903", ns), TimeVerdict::kOk);
  EXPECT_EQ(ns, -kTimeLimitNs);
  EXPECT_EQ(read_time("\"1.5e3\"", ns), TimeVerdict::kOk);
  EXPECT_EQ(ns, 1500000);
  EXPECT_EQ(read_time("1e-400", ns), TimeVerdict::kOk);  // too small for a nanosecond: 0
  EXPECT_EQ(ns, 0);
  for (const char* out : {"4611686018427387.904", "-4611686018427387.904", "9223372036854775.807",
                          "9223372036854775.808", "-9223372036854775.808", "9223372036854775807",
                          "18446744073709551616", "9e21", "-9e21", "9e15", "1e400", "-1e400",
                          "\"NaN\"", "\"Infinity\"", "\"-inf\"", "4.7e15"}) {
    EXPECT_EQ(read_time(out, ns), TimeVerdict::kOutOfRange) << out;
  }
  for (const char* not_number : {"}", "\"abc\"", "null", "true", "\"\"", "[1]"}) {
    EXPECT_EQ(read_time(not_number, ns), TimeVerdict::kNotANumber) << not_number;
  }
  // An end: both within the rule, their sum cannot overflow, and is judged by it too.
  EXPECT_TRUE(import::end_in_range(kTimeLimitNs - 5, 5));
  EXPECT_FALSE(import::end_in_range(kTimeLimitNs - 5, 6));
  EXPECT_TRUE(import::end_in_range(kTimeLimitNs, -kTimeLimitNs));  // a negative dur is 0
}

// The whole message of one refusal, as a user reads it.
TEST(TraceTimes, ARefusalNamesTheFileTheByteTheEventAndTheValue) {
  std::vector<Ev> events = base_events();
  events[3].ts = "9e21";
  const std::string text = trace_text(events);
  const std::string path = write("kernel_9e21.json", text);
  const std::size_t event_at = text.find(R"({"ph":"X","cat":"kernel")");
  const std::size_t value_at = text.find("9e21");
  EXPECT_EQ(read_error(path),
            "cannot read trace " + path + ": \"ts\" 9e21 at byte " + std::to_string(value_at) +
                " is outside the times a trace may hold: a time must be a finite number of "
                "microseconds within +-4611686018427387.903 (2^62 ns, about 146 years either "
                "side of 1970), and so must an event's end (ts + dur) (in the event "
                "\"gemm_kernel\" that starts at byte " +
                std::to_string(event_at) + ")");
  // An end past the rule, both values within it.
  events = base_events();
  events[1].ts = "4611686018427387";
  events[1].dur = "1";
  const std::string end_text = trace_text(events);
  const std::string end_path = write("end_past.json", end_text);
  EXPECT_EQ(read_error(end_path),
            "cannot read trace " + end_path + ": \"ts\" 4611686018427387 plus \"dur\" 1 at byte " +
                std::to_string(end_text.find("\"dur\":1,") + 6) +
                " ends at 4611686018427388.000 us, outside the times a trace may hold: a time "
                "must be a finite number of microseconds within +-4611686018427387.903 (2^62 "
                "ns, about 146 years either side of 1970), and so must an event's end (ts + "
                "dur) (in the event \"aten::mm\" that starts at byte " +
                std::to_string(end_text.find(R"({"ph":"X","cat":"cpu_op")")) + ")");
}

// Every kind of event, ts and dur, each extreme value: refused, with its byte and its event,
// whatever the read leaves out (the verdict must not depend on the reports asked for), also
// in a later piece of a file read on two threads.
TEST(TraceTimes, EveryExtremeTimeOnEveryKindIsRefusedWhateverIsLeftOut) {
  const std::vector<std::string> values = {
      "9223372036854775.807", "9223372036854775.808", "-9223372036854775.808", "9e21", "-9e21",
      "1e400",                "-1e400",               "\"NaN\"",                "\"Infinity\"",
      "4611686018427387.904"};
  int cases = 0;
  for (const std::string& field : {std::string("ts"), std::string("dur")}) {
    for (std::size_t k = 0; k < base_events().size(); ++k) {
      for (const std::string& value : values) {
        std::vector<Ev> events = base_events();
        Ev& e = events[k];
        (field == "ts" ? e.ts : e.dur) = value;
        for (const int padding : {0, 20000}) {
          if (padding != 0 && (value != "9e21" || k % 4 != 1)) continue;
          const std::string text = trace_text(events, padding);
          const std::string path = write("extreme.json", text);
          const std::string event = event_text(e);
          const std::size_t event_at = text.find(event);
          const std::size_t value_at = event_at + event.find("\"" + field + "\":" + value) +
                                       field.size() + 3;
          const std::string expected =
              "cannot read trace " + path + ": \"" + field + "\" " + value + " at byte " +
              std::to_string(value_at) + " is outside the times a trace may hold";
          const std::string where =
              "(in the event \"" + std::string(e.name) + "\" that starts at byte " +
              std::to_string(event_at) + ")";
          for (const TraceReadOptions& options : {TraceReadOptions{}, least()}) {
            const std::string error = read_error(path, options);
            EXPECT_EQ(error.rfind(expected, 0), 0u) << e.kind << " " << field << " " << value
                                                    << " padding " << padding << ": " << error;
            EXPECT_NE(error.find(where), std::string::npos) << error;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GE(cases, 2 * 9 * 10 * 2);
}

// Times within the rule are kept exactly, to the bound.
TEST(TraceTimes, TimesAtTheBoundAreAccepted) {
  std::vector<Ev> events = base_events();
  events[6].ts = "-4611686018427387.903";        // the instant at the lower bound
  events[1].ts = "4611686018426387.903";         // a CPU op ending at the upper bound
  events[1].dur = "1000";
  events[2].dur = "-9223372036854.775";          // a negative dur within the rule: taken as 0
  const std::string path = write("at_bound.json", trace_text(events));
  const auto result = read_trace(path);
  std::int64_t lowest = 0, highest = 0;
  bool negative_dur_seen = false;
  for (const Event& e : result->events()) {
    lowest = std::min(lowest, e.start_ns);
    highest = std::max(highest, e.end_ns);
    if (e.name == "cudaLaunchKernel") {
      negative_dur_seen = true;
      EXPECT_EQ(e.end_ns, e.start_ns);
    }
  }
  EXPECT_TRUE(negative_dur_seen);
  EXPECT_EQ(lowest, -import::kTimeLimitNs);
  EXPECT_EQ(highest, import::kTimeLimitNs);
}

// Four CPU ops of 4611686018427383 us each (within the rule) on one thread under a step: their
// durations sum past INT64_MAX ns, and they overlap each other, so the step's self time
// would pass INT64_MIN.
std::string long_ops_text() {
  const std::string d = "4611686018427383";
  std::string out =
      R"({"schemaVersion":1,"distributedInfo":{"rank":0},"traceEvents":[)"
      R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":10,"tid":10,"ts":-2305843009213693,"dur":4611686018427387})";
  for (int i = 0; i < 4; ++i) {
    out += R"(,{"ph":"X","cat":"cpu_op","name":"aten::long","pid":10,"tid":10,"ts":)" +
           std::to_string(-2305843009213693 + i) + ",\"dur\":" + d + "}";
  }
  // Four kernels on one stream, each overlapping the one before by all but 1 us of its
  // length: the idle report's three gaps are about -2^62 ns each, their sum past INT64_MIN.
  for (int i = 0; i < 4; ++i) {
    out += R"(,{"ph":"X","cat":"kernel","name":"long_kernel","pid":0,"tid":7,"ts":)" +
           std::to_string(-2305843009213693 + i) + ",\"dur\":" + d +
           R"(,"args":{"device":0,"stream":7,"correlation":)" + std::to_string(100 + i) + "}}";
  }
  return out + "]}\n";
}

// key_averages() keeps int64 totals: a total past INT64_MAX saturates there (292 years),
// explicitly, rather than wrapping to a negative time.
TEST(TraceTimes, KeyAveragesTotalsPastInt64Saturate) {
  const auto result = read_trace(write("long_ops.json", long_ops_text()));
  const KeyAverages avg = key_averages(*result);
  bool found = false;
  for (const FunctionEventAvg& row : avg.rows()) {
    if (row.key == "aten::long") {
      found = true;
      EXPECT_EQ(row.count, 4);
      EXPECT_EQ(row.cpu_time_total_ns, std::numeric_limits<std::int64_t>::max());
      EXPECT_EQ(row.self_cpu_time_total_ns, std::numeric_limits<std::int64_t>::max());
    }
    if (row.key == "ProfilerStep#1") {
      EXPECT_EQ(row.self_cpu_time_total_ns, 0);  // its overlapping children took it all
    }
  }
  EXPECT_TRUE(found);
}

// The CLI: each refused input gets exit code 1 and the same message from analyze (all
// reports), analyze --report temporal, analyze diff and merge; merge writes nothing.
TEST(TraceTimes, EveryCommandRefusesInTheSameWords) {
  // Under 1 GB of address space, as containers and batch jobs run it (the refusal allocates
  // nothing large); not under ASan or TSan, whose shadow memory needs far more address space.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 1000000; ";
#endif
  const std::string all =
      " --report temporal,idle,kernels,kernel-dist,overlap,launch,patterns,queue,counters,ops";
  const std::string good = write("good.json", trace_text(base_events()));
  {
    const auto [code, out] = shell(kCli + " analyze " + good + all);
    ASSERT_EQ(code, 0) << out;
  }
  struct Case {
    std::size_t event;
    std::string field, value;
  };
  std::vector<Case> cases;
  for (std::size_t k = 0; k < base_events().size(); ++k) cases.push_back({k, "ts", "9e21"});
  for (const char* v : {"-9223372036854775.808", "1e400", "-1e400", "\"NaN\"",
                        "4611686018427387.904"}) {
    cases.push_back({1, "ts", v});
    cases.push_back({3, "dur", v});
  }
  cases.push_back({1, "dur", "4611686018427387"});  // ts + dur past the rule
  for (const Case& c : cases) {
    std::vector<Ev> events = base_events();
    (c.field == "ts" ? events[c.event].ts : events[c.event].dur) = c.value;
    const std::string path = write("cli_bad.json", trace_text(events));
    const std::string merged = scratch("cli_merged.json").string();
    fs::remove(merged);
    const std::string what = events[c.event].kind + std::string(" ") + c.field + " " + c.value;
    std::string first_line;
    for (const std::string& command :
         {kCli + " analyze " + path + all, kCli + " analyze " + path + " --report temporal",
          kCli + " analyze diff " + path + " " + good, kCli + " merge " + path + " " + good +
                                                           " -o " + merged}) {
      const auto [code, out] = shell(limit + command);
      EXPECT_EQ(code, 1) << what << ": " << command << "\n" << out;
      const std::size_t at = out.find("cannot read trace " + path + ": ");
      ASSERT_NE(at, std::string::npos) << what << ": " << command << "\n" << out;
      const std::string line = out.substr(at, out.find('\n', at) - at);
      EXPECT_NE(line.find(" at byte "), std::string::npos) << line;
      EXPECT_NE(line.find("outside the times a trace may hold"), std::string::npos) << line;
      EXPECT_NE(line.find("(in the event \"" + std::string(events[c.event].name) + "\""),
                std::string::npos)
          << line;
      if (first_line.empty()) first_line = line;
      EXPECT_EQ(line, first_line) << what << ": " << command;
    }
    EXPECT_FALSE(fs::exists(merged)) << what;
  }
}

// Sums past INT64_MAX where a report prints a double: exact (wide sums). analyze diff's
// total of the four long ops, and the idle report's sum of the overlapping kernels' gaps.
TEST(TraceTimes, ReportSumsPastInt64AreExact) {
  const std::string path = write("long_ops_cli.json", long_ops_text());
  const std::string diff_json = scratch("long_diff.json").string();
  {
    const auto [code, out] =
        shell(kCli + " analyze diff " + path + " " + path + " --format json --output " + diff_json);
    ASSERT_EQ(code, 0) << out;
  }
  const nlohmann::json diff = tests::read_json(diff_json);
  bool found = false;
  for (const nlohmann::json& row : diff["ops_diff"]) {
    if (row["name"] != "aten::long") continue;
    found = true;
    // 4 x 4611686018427383 us: 1.8446744073709532e16, past INT64_MAX ns (9.2e15 us).
    const double total = row["Control_total_duration"].get<double>();
    EXPECT_NEAR(total, 4 * 4611686018427383.0, 4.0) << row.dump();
    EXPECT_EQ(row["diff_duration"].get<double>(), 0.0) << row.dump();
  }
  EXPECT_TRUE(found) << diff.dump();

  const std::string idle_json = scratch("long_idle.json").string();
  {
    const auto [code, out] = shell(kCli + " analyze " + path +
                                   " --report temporal,idle,kernels,kernel-dist,overlap,launch,"
                                   "patterns,queue,counters,ops --format json --output " +
                                   idle_json);
    ASSERT_EQ(code, 0) << out;
  }
  const nlohmann::json reports = tests::read_json(idle_json);
  // The gaps: each kernel starts 1 us after the one before, which lasts 4611686018427383 us.
  const double expected = 3 * (1 - 4611686018427383.0);
  bool idle_found = false;
  for (const nlohmann::json& row : reports["idle"]) {
    if (row["idle_category"] != "kernel_wait") continue;
    idle_found = true;
    EXPECT_NEAR(row["idle_time"].get<double>(), expected, 16.0) << row.dump();
  }
  EXPECT_TRUE(idle_found) << reports.dump().substr(0, 2000);
}

}  // namespace trace_times_test
}  // namespace opscope

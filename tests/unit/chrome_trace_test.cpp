#include "export/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "opscope/error.h"
#include "opscope/export.h"
#include "support/test_support.h"

namespace opscope {
namespace chrome_trace_test {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_file;
using testing::read_gzip_file;
using testing::TempDir;

constexpr std::int64_t kBase = 1'700'000'000'123'456'789;
constexpr std::int64_t kPid = 4242;
const std::string kTrickyName = "weird \"name\" \\ \n\t\x01 \xC3\xA9 \xF0\x9F\x94\xA5";

Event range(std::string_view name, std::int32_t thread, std::int64_t start, std::int64_t end,
            std::uint64_t handle, RecordScope scope = RecordScope::kFunction) {
  Event e;
  e.name = name;
  e.thread = thread;
  e.start_ns = kBase + start;
  e.end_ns = kBase + end;
  e.handle = handle;
  e.scope = scope;
  return e;
}

// Two threads (one unnamed), nested ranges, a user scope, a backward op linked to its
// forward, an async range and an instant.
std::shared_ptr<const ProfilerResult> sample_result() {
  ProfilerResult::Builder b;
  const std::int32_t main = b.add_thread({1001, "main"});
  const std::int32_t worker = b.add_thread({1002, ""});
  b.add_event(range("forward", main, 1000, 5000, 1));
  Event mm = range(b.keep(kTrickyName), main, 1500, 2750, 2);
  mm.sequence_nr = 7;
  b.add_event(mm);
  Event backward = range("MulBackward0", worker, 6000, 6001, 3, RecordScope::kBackwardFunction);
  backward.sequence_nr = 7;
  backward.forward_thread_id = 1001;
  b.add_event(backward);
  b.add_event(range("data_loading", worker, 500, 9000, 4, RecordScope::kUserScope));
  Event async = range("async_io", main, 2000, 8000, 42, RecordScope::kUserScope);
  async.kind = EventKind::kAsyncRange;
  b.add_event(async);
  Event mark = range("__mark", main, -250, -250, 5);  // before the window: negative ts
  mark.kind = EventKind::kInstant;
  b.add_event(mark);
  b.add_metadata("distributedInfo", R"({"backend":"nccl","rank":0,"world_size":2})");
  b.add_metadata("note", "\"hi\"");
  b.add_metadata("count", "3");
  b.set_window(kBase, kBase + 10'000'000);
  b.set_pid(kPid);
  b.stats().events_dropped = 5;
  b.stats().buffer_bytes = 1024;
  b.stats().buffer_limit_bytes = 4096;
  b.stats().not_recorded = {"cuda"};
  return b.finish();
}

// The trace events of one phase, in file order.
std::vector<json> events_with(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

const json& by_name(const std::vector<json>& events, const std::string& name) {
  for (const json& e : events) {
    if (e["name"] == name) return e;
  }
  throw std::runtime_error("no event named " + name);
}

TEST(ChromeTrace, TopLevelLayout) {
  const std::string text = chrome_trace_json(*sample_result(), "my trace");
  const json t = json::parse(text);
  EXPECT_EQ(t["schemaVersion"], 1);
  EXPECT_EQ(t["deviceProperties"], json::array());
  EXPECT_EQ(t["distributedInfo"], json::parse(R"({"backend":"nccl","rank":0,"world_size":2})"));
  EXPECT_EQ(t["note"], "hi");
  EXPECT_EQ(t["count"], 3);
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  EXPECT_EQ(t["baseTimeNanoseconds"], kBase);
  EXPECT_EQ(t["traceName"], "my trace");
  const json& o = t["opscope"];
  EXPECT_EQ(o["version"], "0.1.0");
  EXPECT_EQ(o["events_recorded"], 6);
  EXPECT_EQ(o["events_dropped"], 5);
  EXPECT_EQ(o["buffer_bytes"], 1024);
  EXPECT_EQ(o["buffer_limit_bytes"], 4096);
  EXPECT_EQ(o["not_recorded"], json({"cuda"}));
  EXPECT_EQ(o["lenses"], json::array());  // recorded with none
  EXPECT_EQ(t["opscope_not_recorded"], json({"cuda"}));
  // Kineto's key order: metadata after the schema, events before the name.
  EXPECT_LT(text.find("\"schemaVersion\""), text.find("\"distributedInfo\""));
  EXPECT_LT(text.find("\"baseTimeNanoseconds\""), text.find("\"traceEvents\""));
  EXPECT_LT(text.find("\"traceEvents\""), text.find("\"traceName\""));
  EXPECT_TRUE(is_valid_json(text));
}

TEST(ChromeTrace, TraceIdNamesTheWindow) {
  // torch 2.x's Kineto names each trace with 32 hex digits after deviceProperties.
  const std::string text = chrome_trace_json(*sample_result());
  const json t = json::parse(text);
  const std::string id = t["trace_id"];
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789ABCDEF"), std::string::npos) << id;
  EXPECT_LT(text.find("\"deviceProperties\""), text.find("\"trace_id\""));
  EXPECT_LT(text.find("\"trace_id\""), text.find("\"traceEvents\""));
  // The same window exported again is the same file; another window is another trace.
  EXPECT_EQ(json::parse(chrome_trace_json(*sample_result()))["trace_id"], id);
  ProfilerResult::Builder other;
  other.set_window(kBase + 1, kBase + 10'000'000);
  other.set_pid(kPid);
  EXPECT_NE(json::parse(chrome_trace_json(*other.finish()))["trace_id"], id);
}

TEST(ChromeTrace, AnImportedTraceKeepsItsTraceId) {
  ProfilerResult::Builder b;
  b.add_metadata("trace_id", R"("573803A88D3546B7B0F96755A30B7A1B")");
  const std::string text = chrome_trace_json(*b.finish());
  EXPECT_EQ(json::parse(text)["trace_id"], "573803A88D3546B7B0F96755A30B7A1B");
  EXPECT_EQ(text.find("\"trace_id\""), text.rfind("\"trace_id\""));  // written once
}

TEST(ChromeTrace, CompleteEventsAreExact) {
  const json t = json::parse(chrome_trace_json(*sample_result()));
  const std::vector<json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 4u);

  const json& forward = by_name(x, "forward");
  EXPECT_EQ(forward["cat"], "cpu_op");
  EXPECT_EQ(forward["pid"], kPid);
  EXPECT_EQ(forward["tid"], 1001);
  EXPECT_DOUBLE_EQ(forward["ts"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(forward["dur"].get<double>(), 4.0);
  EXPECT_EQ(forward["args"], json::parse(R"({"External id":1,"Record function id":1})"));

  const json& mm = by_name(x, kTrickyName);  // escaped and back, byte for byte
  EXPECT_DOUBLE_EQ(mm["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(mm["dur"].get<double>(), 1.25);
  EXPECT_EQ(mm["args"],
            json::parse(R"({"External id":2,"Record function id":2,"Sequence number":7})"));

  const json& backward = by_name(x, "MulBackward0");
  EXPECT_EQ(backward["cat"], "cpu_op");
  EXPECT_EQ(backward["tid"], 1002);
  EXPECT_DOUBLE_EQ(backward["dur"].get<double>(), 0.001);
  EXPECT_EQ(backward["args"]["Sequence number"], 7);
  EXPECT_EQ(backward["args"]["Fwd thread id"], 1001);

  const json& user = by_name(x, "data_loading");
  EXPECT_EQ(user["cat"], "user_annotation");
  EXPECT_DOUBLE_EQ(user["ts"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(user["dur"].get<double>(), 8.5);
}

TEST(ChromeTrace, TimesHaveThreeDecimals) {
  const std::string text = chrome_trace_json(*sample_result());
  EXPECT_NE(text.find(R"("ts":1.500,"dur":1.250,)"), std::string::npos);
  EXPECT_NE(text.find(R"("ts":6.000,"dur":0.001,)"), std::string::npos);
  EXPECT_NE(text.find(R"("ts":-0.250})"), std::string::npos);
}

TEST(ChromeTrace, AsyncRangeIsABeginEndPair) {
  const json t = json::parse(chrome_trace_json(*sample_result()));
  const std::vector<json> b = events_with(t, "b");
  const std::vector<json> e = events_with(t, "e");
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(e.size(), 1u);
  for (const json& ev : {b[0], e[0]}) {
    EXPECT_EQ(ev["name"], "async_io");
    EXPECT_EQ(ev["cat"], "user_annotation");
    EXPECT_EQ(ev["id"], 42);
    EXPECT_EQ(ev["pid"], kPid);
    EXPECT_EQ(ev["tid"], 1001);  // the thread that began it
  }
  EXPECT_DOUBLE_EQ(b[0]["ts"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(e[0]["ts"].get<double>(), 8.0);
  EXPECT_EQ(b[0]["args"]["External id"], 42);
}

TEST(ChromeTrace, InstantEvent) {
  const json t = json::parse(chrome_trace_json(*sample_result()));
  const std::vector<json> i = events_with(t, "i");
  ASSERT_EQ(i.size(), 1u);
  EXPECT_EQ(i[0]["name"], "__mark");
  EXPECT_EQ(i[0]["s"], "t");
  EXPECT_EQ(i[0]["cat"], "cpu_instant_event");
  EXPECT_EQ(i[0]["tid"], 1001);
  EXPECT_DOUBLE_EQ(i[0]["ts"].get<double>(), -0.25);
}

TEST(ChromeTrace, ProcessAndThreadNames) {
  const json t = json::parse(chrome_trace_json(*sample_result()));
  const std::vector<json> m = events_with(t, "M");
  ASSERT_EQ(m.size(), 7u);  // process name, label and sort index, and two per thread
  std::map<std::pair<std::string, std::uint64_t>, json> args;
  for (const json& e : m) {
    EXPECT_TRUE(e["pid"].is_number_integer());
    EXPECT_TRUE(e["tid"].is_number_integer());
    EXPECT_EQ(e["pid"], kPid);
    args[{e["name"].get<std::string>(), e["tid"].get<std::uint64_t>()}] = e["args"];
  }
  const auto arg = [&](const std::string& what, std::uint64_t tid) { return args[{what, tid}]; };
  EXPECT_EQ(arg("process_name", 0)["name"], "opscope");  // not this process's pid
  EXPECT_EQ(arg("process_labels", 0)["labels"], "CPU");  // as torch 2.x's Kineto labels it
  EXPECT_EQ(args.count({"process_sort_index", 0}), 1u);
  EXPECT_EQ(arg("thread_name", 1001)["name"], "main");
  EXPECT_EQ(arg("thread_name", 1002)["name"], "thread 1002");
  EXPECT_EQ(arg("thread_sort_index", 1001)["sort_index"], 0);
  EXPECT_EQ(arg("thread_sort_index", 1002)["sort_index"], 1);
}

TEST(ChromeTrace, ProcessNameOfThisProcess) {
  ProfilerResult::Builder b;
  b.set_pid(::getpid());
  const json t = json::parse(chrome_trace_json(*b.finish()));
  std::string comm = read_file("/proc/self/comm");
  comm.erase(comm.find('\n'));
  EXPECT_EQ(t["traceEvents"][0]["name"], "process_name");
  EXPECT_EQ(t["traceEvents"][0]["args"]["name"], comm);
}

TEST(ChromeTrace, NamesSharingStorageStayDistinct) {
  // A dynamic name and its prefix share a pointer; the name cache must tell them apart.
  ProfilerResult::Builder b;
  const std::string_view full = b.keep("aten::mm_backward");
  b.add_thread({7, "t"});
  b.add_event(range(full, 0, 0, 10, 1));
  b.add_event(range(full.substr(0, 8), 0, 20, 30, 2));
  b.add_event(range(full, 0, 40, 50, 3));
  const json t = json::parse(chrome_trace_json(*b.finish()));
  const std::vector<json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), 3u);
  EXPECT_EQ(x[0]["name"], "aten::mm_backward");
  EXPECT_EQ(x[1]["name"], "aten::mm");
  EXPECT_EQ(x[2]["name"], "aten::mm_backward");
}

TEST(ChromeTrace, ManyEventsCrossBlockBoundaries) {
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  b.add_thread({2, "b"});
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) names.push_back("op_" + std::to_string(i) + "_\xCE\xBB");
  constexpr int kEvents = 15000;  // about 3 MiB of JSON
  for (int i = 0; i < kEvents; ++i) {
    b.add_event(range(b.keep(names[static_cast<std::size_t>(i) % names.size()]), i % 2, i * 100,
                      i * 100 + 50, static_cast<std::uint64_t>(i)));
  }
  const std::string text = chrome_trace_json(*b.finish());
  EXPECT_TRUE(is_valid_json(text));
  const json t = json::parse(text);
  const std::vector<json> x = events_with(t, "X");
  ASSERT_EQ(x.size(), static_cast<std::size_t>(kEvents));
  std::size_t with_lambda = 0;
  for (const json& e : x) with_lambda += e["name"].get<std::string>().ends_with("_\xCE\xBB");
  EXPECT_EQ(with_lambda, x.size());
}

TEST(ChromeTrace, FileAndGzipHoldTheSameDocument) {
  TempDir dir;
  const auto r = sample_result();
  export_chrome_trace(*r, dir.file("t.json"));
  export_chrome_trace(*r, dir.file("t.json.gz"));
  json plain = json::parse(read_file(dir.file("t.json")));
  json gz = json::parse(read_gzip_file(dir.file("t.json.gz")));
  EXPECT_EQ(plain["traceName"], dir.file("t.json"));  // the path when no name is given
  EXPECT_EQ(gz["traceName"], dir.file("t.json.gz"));
  plain.erase("traceName");
  gz.erase("traceName");
  EXPECT_EQ(plain, gz);
  json in_memory = json::parse(chrome_trace_json(*r));
  in_memory.erase("traceName");
  EXPECT_EQ(plain, in_memory);
  // Nothing else in the directory: the temporaries were renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);
}

TEST(ChromeTrace, FailedExportLeavesNothing) {
  TempDir dir;
  try {
    export_chrome_trace(*sample_result(), dir.file("missing/t.json"));
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), ("cannot write Chrome trace to '" + dir.file("missing/t.json") +
                            "': directory does not exist")
                               .c_str());
  }
  // A failure after writing began (an event naming a thread the result lacks).
  ProfilerResult::Builder b;
  b.add_thread({1, "a"});
  for (int i = 0; i < 20000; ++i) b.add_event(range("op", 0, i, i + 1, 1));
  b.add_event(range("orphan", 5, 30000, 30001, 2));
  const auto broken = b.finish();
  for (const char* name : {"t.json", "t.json.gz"}) {
    EXPECT_THROW(export_chrome_trace(*broken, dir.file(name)), Error);
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ChromeTrace, BadMetadataCannotBreakTheFile) {
  ProfilerResult::Builder b;
  b.add_metadata("broken", "{not json");
  b.add_metadata("traceEvents", "[]");  // would shadow the events
  b.add_metadata("ok", "[1,2]");
  testing::WarningCapture warnings;
  const json t = json::parse(chrome_trace_json(*b.finish()));
  EXPECT_EQ(t["broken"], "{not json");
  EXPECT_EQ(t["ok"], json({1, 2}));
  EXPECT_EQ(t["traceEvents"].size(), 3u);  // the process metadata, not the override
  EXPECT_TRUE(warnings.contains("'broken' is not JSON"));
  EXPECT_TRUE(warnings.contains("'traceEvents' is ignored"));
}

TEST(ChromeTrace, EmptyResultWithoutNotRecorded) {
  ProfilerResult::Builder b;
  const json t = json::parse(chrome_trace_json(*b.finish()));
  EXPECT_FALSE(t.contains("opscope_not_recorded"));
  EXPECT_EQ(t["opscope"]["not_recorded"], json::array());
  EXPECT_EQ(t["traceName"], "");
}

TEST(ChromeTrace, InvalidUtf8InANameStillGivesValidJson) {
  ProfilerResult::Builder b;
  b.add_thread({1, "bad \xFF thread"});
  b.add_event(range(b.keep("op \xC3\x28 \xED\xA0\x80"), 0, 0, 1, 1));
  const std::string text = chrome_trace_json(*b.finish());
  std::string error;
  EXPECT_TRUE(is_valid_json(text, &error)) << error;
  const json t = json::parse(text);
  EXPECT_EQ(events_with(t, "X").at(0)["name"],
            "op \xEF\xBF\xBD( \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

// A second, unrelated consumer: Python's json module, on the plain and the gzip file.
TEST(ChromeTrace, PythonReadsTheFiles) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  TempDir dir;
  for (const char* name : {"t.json", "t.json.gz"}) {
    const std::string path = dir.file(name);
    export_chrome_trace(*sample_result(), path);
    const std::string check =
        "python3 -c 'import gzip,json,sys; p=sys.argv[1]; "
        "t=json.load(gzip.open(p) if p.endswith(\".gz\") else open(p)); "
        "assert any(e[\"name\"]==sys.argv[2] for e in t[\"traceEvents\"])' '" +
        path + "' 'MulBackward0'";
    EXPECT_EQ(std::system(check.c_str()), 0) << name;
  }
}

}  // namespace chrome_trace_test
}  // namespace opscope

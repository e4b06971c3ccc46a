#include "opscope/execution_trace.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "opscope/error.h"
#include "opscope/profiler.h"
#include "opscope/observer.h"
#include "opscope/record_function.h"
#include "opscope/value.h"
#include "support/test_support.h"

namespace opscope {
namespace execution_trace_test {

using nlohmann::json;
using testing::error_of;
using testing::TempDir;
using testing::WarningCapture;

constexpr std::string_view kRoot = "[pytorch|profiler|execution_trace|process]";
constexpr std::string_view kThread = "[pytorch|profiler|execution_trace|thread]";

std::uint64_t os_tid() { return static_cast<std::uint64_t>(::syscall(SYS_gettid)); }

json load(const std::string& path) { return json::parse(testing::read_file(path)); }

// The nodes named `name`.
std::vector<json> named(const json& trace, std::string_view name) {
  std::vector<json> out;
  for (const json& n : trace["nodes"]) {
    if (n["name"] == name) out.push_back(n);
  }
  return out;
}

// The one node named `name` (fails the test when there is not exactly one).
json node(const json& trace, std::string_view name) {
  const std::vector<json> found = named(trace, name);
  EXPECT_EQ(found.size(), 1u) << "nodes named " << name;
  return found.empty() ? json::object() : found.front();
}

json attr(const json& n, std::string_view name) {
  for (const json& a : n["attrs"]) {
    if (a["name"] == name) return a["value"];
  }
  ADD_FAILURE() << "no attr " << name << " in " << n.dump();
  return json();
}

// The thread node of OS thread `tid`.
json thread_node(const json& trace, std::uint64_t tid) {
  for (const json& n : named(trace, kThread)) {
    if (attr(n, "tid") == tid) return n;
  }
  ADD_FAILURE() << "no thread node for tid " << tid;
  return json::object();
}

class ExecutionTraceTest : public ::testing::Test {
 protected:
  void TearDown() override { set_distributed_info(""); }
  TempDir dir_;
};

TEST_F(ExecutionTraceTest, WritesTheGraphOfNestedRangesWithTheirInputs) {
  const std::string path = dir_.file("et.json");
  {
    ExecutionTraceObserver et;
    EXPECT_EQ(&et.register_callback(path), &et);
    et.start();
    {
      OPSCOPE_RECORD_FUNCTION("outer");
      {
        OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", Value::tensor({2, 3}, "float", {3, 1}),
                                            Value::tensor({3, 4}, "double"));
        {
          const std::int64_t sizes[] = {5};
          const Value items[] = {Value::tensor(std::span<const std::int64_t>(sizes), "long int"),
                                 Value(7)};
          const Value inputs[] = {Value(42),
                                  Value(0.5),
                                  Value(true),
                                  Value("say \"hi\"\n"),
                                  Value::list(items),
                                  Value(std::numeric_limits<double>::infinity()),
                                  Value()};
          RecordFunction add(RecordScope::kFunction);
          add.before("aten::add", inputs, 17);
        }
      }
    }
    et.stop();
  }  // the destructor unregisters: the file is complete

  const json trace = load(path);
  EXPECT_EQ(trace["schema"], "1.1.1-chakra.0.0.4");
  EXPECT_EQ(trace["pid"], ::getpid());
  EXPECT_TRUE(std::regex_match(trace["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")))
      << trace["time"];
  EXPECT_LE(trace["start_ts"].get<std::int64_t>(), trace["finish_ts"].get<std::int64_t>());

  const json root = node(trace, kRoot);
  EXPECT_EQ(root["id"], 1);
  EXPECT_EQ(root["ctrl_deps"], 1);
  const json thread = thread_node(trace, os_tid());
  EXPECT_EQ(thread["ctrl_deps"], 1);
  const json outer = node(trace, "outer");
  const json mm = node(trace, "aten::mm");
  const json add = node(trace, "aten::add");
  EXPECT_EQ(outer["ctrl_deps"], thread["id"]);
  EXPECT_EQ(mm["ctrl_deps"], outer["id"]);
  EXPECT_EQ(add["ctrl_deps"], mm["id"]);
  EXPECT_GE(thread["id"].get<int>(), 2);
  EXPECT_LT(thread["id"], outer["id"]);
  EXPECT_LT(outer["id"], mm["id"]);
  EXPECT_LT(mm["id"], add["id"]);
  // Written as the ranges end: innermost first, the process node last.
  EXPECT_EQ(trace["nodes"].back()["id"], 1);

  // Tensors: [id, storage, offset, numel, itemsize, device], ids after the op's.
  const json& in = mm["inputs"];
  EXPECT_EQ(in["types"], json({"Tensor(float)", "Tensor(double)"}));
  EXPECT_EQ(in["shapes"], json::parse("[[2,3],[3,4]]"));
  EXPECT_EQ(in["strides"], json::parse("[[3,1],[]]"));
  ASSERT_EQ(in["values"].size(), 2u);
  EXPECT_GT(in["values"][0][0], mm["id"]);
  EXPECT_NE(in["values"][0][0], in["values"][1][0]);
  EXPECT_EQ(in["values"][0][1], 0);
  EXPECT_EQ(in["values"][0][2], 0);
  EXPECT_EQ(in["values"][0][3], 6);
  EXPECT_EQ(in["values"][0][4], 4);
  EXPECT_EQ(in["values"][0][5], "cpu");
  EXPECT_EQ(in["values"][1][3], 12);
  EXPECT_EQ(in["values"][1][4], 8);
  EXPECT_LT(in["values"][1][0], add["id"]);  // one counter for ops and tensors

  const json& a = add["inputs"];
  EXPECT_EQ(a["types"], json({"Int", "Double", "Bool", "String",
                              "GenericList[Tensor(long int),Int]", "Double", "None"}));
  EXPECT_EQ(a["values"][0], 42);
  EXPECT_EQ(a["values"][1], 0.5);
  EXPECT_EQ(a["values"][2], true);
  EXPECT_EQ(a["values"][3], "say \"hi\"\n");
  EXPECT_EQ(a["values"][4][0][3], 5);  // the list's tensor: numel
  EXPECT_EQ(a["values"][4][0][4], 8);
  EXPECT_EQ(a["values"][4][1], 7);
  EXPECT_EQ(a["values"][5], "inf");
  EXPECT_EQ(a["shapes"], json::parse("[[],[],[],[],[[5],[]],[],[]]"));
  EXPECT_EQ(a["strides"], json::parse("[[],[],[],[],[[],[]],[],[]]"));
  EXPECT_EQ(attr(add, "seq_id"), 17);
  EXPECT_EQ(attr(add, "scope"), 0);
  EXPECT_EQ(attr(add, "tid"), os_tid());
  EXPECT_NE(attr(add, "rf_id"), 0);
  EXPECT_EQ(attr(add, "fw_parent"), 0);
  EXPECT_EQ(attr(add, "op_schema"), "");
  EXPECT_EQ(add["outputs"]["values"], json::array());
}

TEST_F(ExecutionTraceTest, RecordsOutputsGivenToSetOutputs) {
  const std::string path = dir_.file("et.json");
  {
    ExecutionTraceObserver et;
    et.register_callback(path).start();
    RecordFunction rf("aten::relu");
    // A temporary: set_outputs copies what the observers need.
    rf.set_outputs({Value::tensor({4, 4}, "c10::Half", {4, 1}), Value(3)});
    rf.end();
  }
  const json relu = node(load(path), "aten::relu");
  EXPECT_EQ(relu["outputs"]["types"], json({"Tensor(c10::Half)", "Int"}));
  EXPECT_EQ(relu["outputs"]["shapes"], json::parse("[[4,4],[]]"));
  EXPECT_EQ(relu["outputs"]["strides"], json::parse("[[4,1],[]]"));
  EXPECT_EQ(relu["outputs"]["values"][0][3], 16);
  EXPECT_EQ(relu["outputs"]["values"][0][4], 2);
  EXPECT_EQ(relu["outputs"]["values"][1], 3);
}

TEST_F(ExecutionTraceTest, OutputsReachOnlyObserversThatAskForThem) {
  std::vector<std::string> seen_with, seen_without;
  const auto end_logger = [](std::vector<std::string>& log) {
    return [&log](const RecordFunction& rf, ObserverContext*) {
      for (const Value& v : rf.outputs()) log.emplace_back(v.dtype());
      log.push_back("|");
    };
  };
  const auto no_start = [](const RecordFunction&) { return std::unique_ptr<ObserverContext>(); };
  const CallbackHandle with = add_global_callback(
      RecordFunctionCallback(no_start, end_logger(seen_with)).needs_outputs(true));
  {
    RecordFunction rf("a");
    EXPECT_TRUE(rf.wants_outputs());
    rf.set_outputs({Value::tensor({1}, "double")});
    EXPECT_EQ(rf.outputs().size(), 1u);
  }
  remove_callback(with);
  const CallbackHandle without =
      add_global_callback(RecordFunctionCallback(no_start, end_logger(seen_without)));
  {
    RecordFunction rf("b");
    EXPECT_FALSE(rf.wants_outputs());
    rf.set_outputs({Value::tensor({1}, "double")});
  }
  remove_callback(without);
  {
    RecordFunction rf("c");  // nobody observes: set_outputs does nothing
    rf.set_outputs({Value::tensor({1})});
    EXPECT_TRUE(rf.outputs().empty());
  }
  EXPECT_EQ(seen_with, (std::vector<std::string>{"double", "|"}));
  EXPECT_EQ(seen_without, (std::vector<std::string>{"|"}));
}

TEST_F(ExecutionTraceTest, CutsListsAtTheLimitAndSaysSoOnce) {
  const std::string path = dir_.file("et.json");
  WarningCapture warnings;
  {
    ExecutionTraceObserver et;
    et.register_callback(path).start();
    const std::vector<Value> items(kMaxRecordedListItems + 100, Value(1));
    const Value inputs[] = {Value::list(items)};
    for (int i = 0; i < 2; ++i) {
      RecordFunction rf(RecordScope::kFunction);
      rf.before("aten::cat", inputs);
    }
  }
  const std::vector<json> cats = named(load(path), "aten::cat");
  ASSERT_EQ(cats.size(), 2u);
  EXPECT_EQ(cats[0]["inputs"]["values"][0].size(), kMaxRecordedListItems);
  EXPECT_EQ(cats[0]["inputs"]["shapes"][0].size(), kMaxRecordedListItems);
  const std::string type = cats[0]["inputs"]["types"][0];
  EXPECT_EQ(std::count(type.begin(), type.end(), ','), kMaxRecordedListItems - 1);
  int cut_warnings = 0;
  for (const auto& m : warnings.messages()) cut_warnings += m.find("was cut") != m.npos;
  EXPECT_EQ(cut_warnings, 1);
}

TEST_F(ExecutionTraceTest, EachThreadHasItsThreadNode) {
  const std::string path = dir_.file("et.json");
  std::uint64_t tids[2] = {};
  {
    ExecutionTraceObserver et;
    et.register_callback(path).start();
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([t, &tids] {
        tids[t] = os_tid();
        for (int i = 0; i < 50; ++i) {
          RecordFunction outer("outer" + std::to_string(t));
          RecordFunction inner("inner" + std::to_string(t));
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  const json trace = load(path);
  EXPECT_EQ(named(trace, kThread).size(), 2u);
  for (int t = 0; t < 2; ++t) {
    const json thread = thread_node(trace, tids[t]);
    const std::vector<json> outers = named(trace, "outer" + std::to_string(t));
    const std::vector<json> inners = named(trace, "inner" + std::to_string(t));
    ASSERT_EQ(outers.size(), 50u);
    ASSERT_EQ(inners.size(), 50u);
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(outers[i]["ctrl_deps"], thread["id"]);
      EXPECT_EQ(attr(outers[i], "tid"), tids[t]);
      // Each inner ends before its outer, so inner i is written just before outer i.
      EXPECT_EQ(inners[i]["ctrl_deps"], outers[i]["id"]);
    }
  }
  // Every id is unique.
  std::set<std::uint64_t> ids;
  for (const json& n : trace["nodes"]) EXPECT_TRUE(ids.insert(n["id"].get<std::uint64_t>()).second);
}

TEST_F(ExecutionTraceTest, AnAsyncRangeEndingOnAnotherThreadLeavesTheStackRight) {
  const std::string path = dir_.file("et.json");
  {
    ExecutionTraceObserver et;
    et.register_callback(path).start();
    RecordFunction outer("outer");
    auto async = std::make_unique<RecordFunction>("async");
    {
      RecordFunction inner("inner");
      std::thread([&] { async->end(); }).join();  // ends under "inner" on another thread
      RecordFunction child("child");              // still inside "inner"
    }
    RecordFunction after("after");  // back inside "outer"
  }
  const json trace = load(path);
  const json outer = node(trace, "outer");
  const json async = node(trace, "async");
  const json inner = node(trace, "inner");
  EXPECT_EQ(async["ctrl_deps"], outer["id"]);
  EXPECT_EQ(attr(async, "tid"), os_tid());  // the thread that began it
  EXPECT_EQ(inner["ctrl_deps"], async["id"]);
  EXPECT_EQ(node(trace, "child")["ctrl_deps"], inner["id"]);
  EXPECT_EQ(node(trace, "after")["ctrl_deps"], outer["id"]);
  EXPECT_EQ(named(trace, kThread).size(), 1u);  // the ending thread began nothing
}

TEST_F(ExecutionTraceTest, RecordsOnlyWhileRunning) {
  const std::string path = dir_.file("et.json");
  ExecutionTraceObserver et;
  et.register_callback(path);
  EXPECT_TRUE(et.is_registered());
  EXPECT_FALSE(et.is_running());
  { RecordFunction rf("before_start"); }
  et.start();
  EXPECT_TRUE(et.is_running());
  { RecordFunction rf("window1"); }
  auto spanning = std::make_unique<RecordFunction>("spanning");
  et.stop();
  EXPECT_FALSE(et.is_running());
  { RecordFunction rf("between"); }
  spanning.reset();  // began while running: still written
  et.start();
  { RecordFunction rf("window2"); }
  et.unregister_callback();
  EXPECT_FALSE(et.is_registered());
  EXPECT_FALSE(et.is_running());
  { RecordFunction rf("after_unregister"); }

  const json trace = load(path);
  EXPECT_TRUE(named(trace, "before_start").empty());
  EXPECT_TRUE(named(trace, "between").empty());
  EXPECT_TRUE(named(trace, "after_unregister").empty());
  EXPECT_EQ(named(trace, "window1").size(), 1u);
  EXPECT_EQ(named(trace, "window2").size(), 1u);
  EXPECT_EQ(named(trace, "spanning").size(), 1u);
  EXPECT_EQ(named(trace, kRoot).size(), 1u);
}

TEST_F(ExecutionTraceTest, AtMostOneObserverPerProcess) {
  ExecutionTraceObserver a, b;
  a.register_callback(dir_.file("a.json"));
  const std::string error = error_of([&] { b.register_callback(dir_.file("b.json")); });
  EXPECT_NE(error.find("already registered"), std::string::npos) << error;
  EXPECT_NE(error.find(dir_.file("a.json")), std::string::npos) << error;
  EXPECT_FALSE(b.is_registered());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("b.json")));
  a.unregister_callback();
  b.register_callback(dir_.file("b.json"));
  EXPECT_TRUE(b.is_registered());
}

TEST_F(ExecutionTraceTest, RegisteringTwiceAddsNoSecondObserverAndWarnsOnce) {
  const std::string path = dir_.file("et.json");
  WarningCapture warnings;
  {
    ExecutionTraceObserver et;
    et.register_callback(path);
    et.register_callback(path);
    et.register_callback(dir_.file("other.json"));
    EXPECT_EQ(et.get_output_file_path(), path);
    et.start();
    { RecordFunction rf("op"); }
  }
  EXPECT_EQ(named(load(path), "op").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("other.json")));
  int repeats = 0;
  for (const auto& m : warnings.messages()) repeats += m.find("already registered") != m.npos;
  EXPECT_EQ(repeats, 1);
}

TEST_F(ExecutionTraceTest, OutputPathNeedsARegisteredCallback) {
  ExecutionTraceObserver et;
  EXPECT_EQ(error_of([&] { et.get_output_file_path(); }),
            "A callback to the ET profiler needs to be registered first before getting the "
            "output file path");
  et.register_callback(dir_.file("et.json"));
  EXPECT_EQ(et.get_output_file_path(), dir_.file("et.json"));
  et.cleanup();
  EXPECT_NE(error_of([&] { et.get_output_file_path(); }), "(no error)");
}

TEST_F(ExecutionTraceTest, AnUnwritablePathFailsAtRegisterAndLeavesNoFile) {
  const std::string blocker = dir_.file("a_file");
  { std::ofstream(blocker) << "x"; }
  const std::string path = blocker + "/et.json";  // its "directory" is a file
  ExecutionTraceObserver et;
  const std::string error = error_of([&] { et.register_callback(path); });
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("Not a directory"), std::string::npos) << error;
  EXPECT_FALSE(et.is_registered());
  // No temporary left behind, and the registration is free for another observer.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()),
                          std::filesystem::directory_iterator()),
            1);
  ExecutionTraceObserver other;
  other.register_callback(dir_.file("ok.json"));
  EXPECT_TRUE(other.is_registered());
}

TEST_F(ExecutionTraceTest, WritesUnderATemporaryNameUntilUnregistered) {
  const std::string path = dir_.file("et.json");
  ExecutionTraceObserver et;
  et.register_callback(path).start();
  { RecordFunction rf("op"); }
  et.stop();
  EXPECT_FALSE(std::filesystem::exists(path));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    names.push_back(e.path().filename().string());
  }
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind("et.json.tmp.", 0), 0u) << names[0];
  et.unregister_callback();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(dir_.file(names[0])));
  const json trace = load(path);
  EXPECT_TRUE(trace.contains("finish_ts"));
  EXPECT_EQ(named(trace, "op").size(), 1u);
}

TEST_F(ExecutionTraceTest, AProfilerRunsItDuringItsRecordingWindowsOnly) {
  const std::string path = dir_.file("et.json");
  auto et = std::make_shared<ExecutionTraceObserver>();
  et->register_callback(path);
  {
    ProfilerConfig config;
    config.schedule = schedule({.wait = 1, .warmup = 1, .active = 1, .repeat = 1});
    config.execution_trace_observer = et;
    Profiler prof(config);
    prof.start();
    for (int step = 0; step < 5; ++step) {
      EXPECT_EQ(et->is_running(), prof.current_action() == ProfilerAction::kRecordAndSave)
          << "step " << step;
      RecordFunction rf("work" + std::to_string(step));
      rf.end();
      prof.step();
    }
    prof.stop();
    EXPECT_TRUE(et->is_registered());  // until the profiler goes away
  }
  EXPECT_FALSE(et->is_registered());
  const json trace = load(path);
  for (int step = 0; step < 5; ++step) {
    EXPECT_EQ(named(trace, "work" + std::to_string(step)).size(), step == 2 ? 1u : 0u)
        << "step " << step;
  }
  const json work = node(trace, "work2");
  const json step2 = node(trace, "ProfilerStep#2");
  EXPECT_EQ(work["ctrl_deps"], step2["id"]);
  EXPECT_TRUE(named(trace, "ProfilerStep#1").empty());
  EXPECT_TRUE(named(trace, "ProfilerStep#3").empty());
}

TEST_F(ExecutionTraceTest, RecordsTheProcessGroupNodeFromTheDistributedInfo) {
  EXPECT_NE(error_of([] { set_distributed_info("{not json"); }), "(no error)");
  const std::string info = R"({"backend":"nccl","rank":1,"world_size":2,"pg_count":1,)"
                           R"("pg_config":[{"pg_name":"0","pg_desc":"default_pg","ranks":[0,1]}]})";
  set_distributed_info(info);
  EXPECT_EQ(distributed_info(), info);

  const std::string path = dir_.file("et.json");
  auto et = std::make_shared<ExecutionTraceObserver>();
  et->register_callback(path);
  std::shared_ptr<const ProfilerResult> result;
  {
    ProfilerConfig config;
    config.execution_trace_observer = et;
    Profiler prof(config);
    prof.start();
    prof.stop();
    result = prof.shared_result();
  }
  const json pg = node(load(path), "## process_group:init ##");
  EXPECT_EQ(pg["inputs"]["types"], json({"String"}));
  EXPECT_EQ(json::parse(pg["inputs"]["values"][0].get<std::string>()),
            json::parse(info)["pg_config"]);
  EXPECT_EQ(attr(pg, "scope"), static_cast<int>(RecordScope::kUserScope));

  bool found = false;
  for (const auto& [key, value] : result->metadata()) {
    if (key == "distributedInfo") {
      found = true;
      EXPECT_EQ(json::parse(value), json::parse(info));
    }
  }
  EXPECT_TRUE(found);

  // Without pg_config the whole info is the input; an empty string clears it.
  set_distributed_info(R"({"rank":3})");
  const std::string path2 = dir_.file("et2.json");
  {
    ExecutionTraceObserver et2;
    et2.register_callback(path2).start();
  }
  EXPECT_EQ(node(load(path2), "## process_group:init ##")["inputs"]["values"][0], R"({"rank":3})");
  set_distributed_info("");
  EXPECT_EQ(distributed_info(), "");
  const std::string path3 = dir_.file("et3.json");
  {
    ExecutionTraceObserver et3;
    et3.register_callback(path3).start();
  }
  EXPECT_TRUE(named(load(path3), "## process_group:init ##").empty());
}

TEST_F(ExecutionTraceTest, StartWithoutRegisteringWarns) {
  WarningCapture warnings;
  ExecutionTraceObserver et;
  et.start();
  EXPECT_FALSE(et.is_running());
  EXPECT_TRUE(warnings.contains("register_callback"));
  et.unregister_callback();  // nothing to do
}

}  // namespace execution_trace_test
}  // namespace opscope

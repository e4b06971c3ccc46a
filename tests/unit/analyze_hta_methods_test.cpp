// The reports behind the HTA methods of python/opscope/_hta_methods.py ("events",
// "annotations", "aten-launch", "cupti-counters" and the idle report's "idle_intervals") on a
// small Kineto trace written here, whose every answer is worked out by hand below.
// python/tests/test_hta_methods.py compares the same methods with HTA itself on real traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/test_support.h"

namespace opscope {
namespace analyze_hta_methods_test {

// One profiler step on thread 1 of process 1; GPU work on stream 7 (pid 0, tid 7), times in
// us. aten::mul launches k1; aten::add launches k2 then k3. Each kernel has a CUPTI range
// (counter c1 on all, c2 on the first only); the GPU annotation "fwd" twice (100 and 50 us),
// the CPU annotation "cpu_anno" once.
constexpr const char* kTrace = R"({"traceEvents": [
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
 {"ph":"X","cat":"user_annotation","name":"cpu_anno","pid":1,"tid":1,"ts":90,"dur":300},
 {"ph":"X","cat":"cpu_op","name":"aten::mul","pid":1,"tid":1,"ts":100,"dur":200},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":150,"dur":20,
  "args":{"correlation":1}},
 {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":400,"dur":300},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":410,"dur":10,
  "args":{"correlation":2}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":450,"dur":10,
  "args":{"correlation":3}},
 {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":300,"dur":50,
  "args":{"stream":7,"correlation":1,"device":0}},
 {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":500,"dur":10,
  "args":{"stream":7,"correlation":2,"device":0}},
 {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":520,"dur":10,
  "args":{"stream":7,"correlation":3,"device":0}},
 {"ph":"X","cat":"gpu_user_annotation","name":"fwd","pid":0,"tid":7,"ts":290,"dur":100},
 {"ph":"X","cat":"gpu_user_annotation","name":"fwd","pid":0,"tid":7,"ts":490,"dur":50},
 {"ph":"X","cat":"cuda_profiler_range","name":"k1","pid":0,"tid":0,"ts":300,"dur":50,
  "args":{"c1":5,"c2":2.5}},
 {"ph":"X","cat":"cuda_profiler_range","name":"k2","pid":0,"tid":0,"ts":500,"dur":10,
  "args":{"c1":6}},
 {"ph":"X","cat":"cuda_profiler_range","name":"k3","pid":0,"tid":0,"ts":520,"dur":10,
  "args":{"c1":7}}
]})";

class HtaMethodReports : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = (dir_.path() / "rank.json").string();
    std::ofstream(path) << kTrace;
    ranks_.push_back(read_trace(path));
  }

  // The table `table` of report `name`, as {column: cells}.
  Report table(const std::string& name, const std::string& table) {
    for (Report& r : run_report(name, ranks_)) {
      if (r.name == table) return r;
    }
    ADD_FAILURE() << name << " has no table " << table;
    return {};
  }

  static const ReportCell& cell(const Report& r, std::size_t row, const std::string& column) {
    for (std::size_t c = 0; c < r.columns.size(); ++c) {
      if (r.columns[c] == column) return r.rows.at(row).at(c);
    }
    ADD_FAILURE() << r.name << " has no column " << column;
    static const ReportCell none = std::string("?");
    return none;
  }
  static double num(const Report& r, std::size_t row, const std::string& column) {
    const ReportCell& v = cell(r, row, column);
    return std::holds_alternative<double>(v) ? std::get<double>(v)
                                             : static_cast<double>(std::get<std::int64_t>(v));
  }
  static std::string text(const Report& r, std::size_t row, const std::string& column) {
    return std::get<std::string>(cell(r, row, column));
  }

  testing::TempDir dir_;
  std::vector<std::shared_ptr<const ProfilerResult>> ranks_;
};

TEST_F(HtaMethodReports, AnnotationsAreCountedPerCategoryAndName) {
  const Report r = table("annotations", "annotations");
  // (cat, name) sorted: the GPU's "fwd", then the CPU's two.
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(text(r, 0, "cat"), "gpu_user_annotation");
  EXPECT_EQ(text(r, 0, "name"), "fwd");
  EXPECT_EQ(num(r, 0, "count"), 2);
  EXPECT_EQ(num(r, 0, "sum"), 150);
  EXPECT_EQ(num(r, 0, "max"), 100);
  EXPECT_EQ(num(r, 0, "min"), 50);
  EXPECT_EQ(num(r, 0, "mean"), 75);
  EXPECT_NEAR(num(r, 0, "std"), std::sqrt(2 * 25.0 * 25.0), 1e-9);  // pandas' ddof 1
  EXPECT_EQ(text(r, 1, "name"), "ProfilerStep#1");
  EXPECT_EQ(text(r, 2, "name"), "cpu_anno");
  EXPECT_TRUE(std::isnan(num(r, 2, "std")));  // one value: NaN, as pandas
}

TEST_F(HtaMethodReports, AtenLaunchesGroupAnOperatorsKernelsInLaunchOrder) {
  const Report r = table("aten-launch", "aten_launch");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(text(r, 0, "aten_op_name"), "aten::add");
  EXPECT_EQ(text(r, 0, "kernel_sequence"), "k2 -> k3");
  EXPECT_EQ(num(r, 0, "occurrence_count"), 1);
  EXPECT_EQ(num(r, 0, "avg_aten_op_launch_delay"), 10);  // 410 - 400: the first launch
  EXPECT_EQ(num(r, 0, "avg_runtime_delay"), 90);         // 500 - 410
  EXPECT_EQ(text(r, 1, "aten_op_name"), "aten::mul");
  EXPECT_EQ(text(r, 1, "kernel_sequence"), "k1");
  EXPECT_EQ(num(r, 1, "avg_aten_op_launch_delay"), 50);
  EXPECT_EQ(num(r, 1, "avg_runtime_delay"), 150);
}

TEST_F(HtaMethodReports, CuptiRangesTakeTheNthLaunchsOperators) {
  const Report r = table("cupti-counters", "cupti_counters");
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(text(r, 0, "name"), "k1");
  EXPECT_EQ(text(r, 0, "op_stack"), "aten::mul");
  EXPECT_EQ(text(r, 1, "top_level_op"), "aten::add");
  EXPECT_EQ(text(r, 2, "bottom_level_op"), "aten::add");
  // c1 on every range; c2 on one: a float column with NaN where a range lacks it.
  EXPECT_EQ(num(r, 2, "c1"), 7);
  EXPECT_EQ(num(r, 0, "c2"), 2.5);
  EXPECT_TRUE(std::isnan(num(r, 1, "c2")));
}

TEST_F(HtaMethodReports, EventsAreHtasFrame) {
  const Report r = table("events", "events");
  const Report symbols = table("events", "symbols");
  // Names and categories are ids of the symbols table, each string once.
  const auto name = [&](std::size_t row, const char* column) {
    return text(symbols, static_cast<std::size_t>(num(r, row, column)), "symbol");
  };
  EXPECT_EQ(symbols.rows.size(), 15u);  // 9 names, 6 categories
  ASSERT_EQ(r.rows.size(), 15u);        // every complete event with a category
  std::size_t launch = 0, k1 = 0;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    EXPECT_EQ(num(r, i, "index"), static_cast<double>(i));
    if (i > 0) EXPECT_LE(num(r, i - 1, "ts"), num(r, i, "ts"));  // in time order
    if (name(i, "name") == "cudaLaunchKernel" && num(r, i, "correlation") == 1) launch = i;
    if (name(i, "name") == "k1" && name(i, "cat") == "kernel") k1 = i;
  }
  EXPECT_EQ(num(r, launch, "index_correlation"), static_cast<double>(k1));
  EXPECT_EQ(num(r, k1, "index_correlation"), static_cast<double>(launch));
  EXPECT_EQ(num(r, k1, "stream"), 7);
  EXPECT_EQ(num(r, launch, "stream"), -1);
  EXPECT_EQ(num(r, k1, "iteration"), 1);  // its launcher's step
  EXPECT_EQ(num(r, 0, "ts"), 0);          // from the job's first event
}

TEST_F(HtaMethodReports, IdleIntervalsDescribeEachCategorysGaps) {
  const Report r = table("idle", "idle_intervals");
  // k2 starts 150 us after k1 ended, launched after that end: host_wait; k3 10 us after k2,
  // launched before k2 ended: kernel_wait (under 30 us); the first kernel's "other" has no gap.
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(text(r, 0, "idle_category"), "host_wait");
  EXPECT_EQ(num(r, 0, "count"), 1);
  EXPECT_EQ(num(r, 0, "mean"), 150);
  EXPECT_EQ(text(r, 1, "idle_category"), "kernel_wait");
  EXPECT_EQ(num(r, 1, "max"), 10);
  EXPECT_EQ(text(r, 2, "idle_category"), "other");
  EXPECT_EQ(num(r, 2, "count"), 0);
  EXPECT_TRUE(std::isnan(num(r, 2, "mean")));
}

}  // namespace analyze_hta_methods_test
}  // namespace opscope

// `opscope analyze diff` (trace_diff()) against Holistic Trace Analysis's TraceDiff run live
// (tests/peers/hta_diff.py) on the real traces in ../shared/peers/kineto-traces, where opscope
// departs from it on purpose, and its command line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "opscope/trace_analysis.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"

namespace opscope {
namespace analyze_diff_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::kCli;
using tests::kPeers;
using tests::read_json;
using tests::scratch;

const std::string kTraces = kPeers + "/kineto-traces/";

// HTA's tables for `control` and `test` with `flags` (hta_diff.py takes opscope's), or a skip
// reason in `why`. Rounding off, as in hta_oracle.h: opscope keeps the nanoseconds.
nlohmann::json hta_diff(const std::string& control, const std::string& test,
                        const std::string& flags, std::string& why) {
  const fs::path out = scratch("hta_diff.json");
  fs::remove(out);
  const auto [code, text] =
      shell("HTA_DISABLE_NS_ROUNDING=1 /usr/bin/python3 " + std::string(OPSCOPE_SOURCE_DIR) +
            "/tests/peers/hta_diff.py " + kPeers + "/hta " + control + " " + test + " " +
            out.string() + " " + flags);
  if (code == 3) {
    why = text;
    return {};
  }
  EXPECT_EQ(code, 0) << text;
  return code == 0 ? read_json(out) : nlohmann::json{};
}

nlohmann::json ours_diff(const std::string& control, const std::string& test,
                         const std::string& flags) {
  const fs::path out = scratch("ours_diff.json");
  fs::remove(out);
  // --steps-by-name: HTA's rows for the step spans (the CLI matches them by position, issue 38).
  const auto [code, text] = shell(kCli + " analyze diff " + control + " " + test + " " + flags +
                                  " --steps-by-name --format json --output " + out.string());
  EXPECT_EQ(code, 0) << text;
  return code == 0 ? read_json(out) : nlohmann::json{};
}

// Rows in the same order (HTA's: the control's names sorted, then the test's new ones), the
// same names, numbers within 0.5 % or 1 us.
void expect_same_rows(const nlohmann::json& want, const nlohmann::json& got,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    for (const auto& [column, value] : want[i].items()) {
      SCOPED_TRACE(what + " row " + std::to_string(i) + " column " + column);
      ASSERT_TRUE(got[i].contains(column)) << got[i];
      if (value.is_number()) {
        const double w = value.get<double>();
        EXPECT_NEAR(got[i][column].get<double>(), w, std::max(1.0, 0.005 * std::abs(w)));
      } else {
        EXPECT_EQ(got[i][column], value);
      }
    }
  }
}

struct Case {
  std::string control, test, flags;
  std::size_t min_rows;  // guards against a comparison of two empty tables
};

TEST(AnalyzeDiffAgainstHta, TablesMatchOnRealTraces) {
  const std::vector<Case> cases = {
      // Made for TraceDiff: the test run adds CPU ops and drops a kernel and an all_reduce.
      {"trace_compare/base", "trace_compare/test", "", 7},
      {"trace_compare/base", "trace_compare/test", "--test-iteration 1010", 11},
      {"trace_compare/base", "trace_compare/test",
       "--control-iteration 1009,1010 --test-iteration 1009,1010 --device cpu", 8},
      {"trace_compare/base", "trace_compare/test", "--device gpu --control-iteration 1010", 1},
      // Two ranks of one job against each other, and both ranks summed against rank 1.
      {"trace_filter", "trace_filter", "--test-rank 1", 300},
      {"trace_filter", "trace_filter", "--control-rank 0,1 --control-iteration 551,552", 300},
      // Different jobs, different iteration numbers (551 against 4), float timestamps.
      {"trace_filter", "nccl_parser_config", "", 400},
      {"nccl_parser_config", "nccl_parser_config",
       "--control-iteration 5 --test-iteration 6 --device gpu", 50},
      {"critical_path/cuda_event_sync", "critical_path/cuda_event_sync", "", 20},
      {"cpu_only", "triton_example", "", 5},
  };
  for (const Case& c : cases) {
    const std::string what = c.control + " vs " + c.test + " " + c.flags;
    const std::string control = kTraces + c.control;
    const std::string test = kTraces + c.test;
    if (!fs::exists(control) || !fs::exists(test)) GTEST_SKIP() << "no " << control;
    std::string why;
    const nlohmann::json want = hta_diff(control, test, c.flags, why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours_diff(control, test, c.flags);
    EXPECT_GE(got["ops_diff"].size(), c.min_rows) << what;
    expect_same_rows(want["ops_diff"], got["ops_diff"], what);
    EXPECT_EQ(got["ops_summary"], want["ops_summary"]) << what;
  }
}

// Short names group the kernels of one template as one row. HTA's ops_diff takes no
// use_short_name (its lists are by full name); opscope's ops_summary lists the short names
// of its ops_diff table, so only that table is compared.
TEST(AnalyzeDiffAgainstHta, ShortNamesMatch) {
  const std::string dir = kTraces + "trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::string why;
  const std::string flags = "--test-rank 1 --short-names";
  const nlohmann::json want = hta_diff(dir, dir, flags, why);
  if (!why.empty()) GTEST_SKIP() << why;
  const nlohmann::json got = ours_diff(dir, dir, flags);
  ASSERT_FALSE(got["ops_diff"].empty());
  EXPECT_TRUE(got["ops_diff"][0].contains("short_name"));
  EXPECT_LT(got["ops_diff"].size(), ours_diff(dir, dir, "--test-rank 1")["ops_diff"].size());
  expect_same_rows(want["ops_diff"], got["ops_diff"], "short names");
  for (const auto& row : got["ops_summary"]) {
    EXPECT_EQ(row["name"].get<std::string>().find('<'), std::string::npos) << row;
  }
}

// Where HTA is wrong: GPU work on stream 0 (ROCm puts kernels and copies there) gets no
// iteration in HTA (its add_iteration handles streams above 0 and CPU ops on stream 0 only),
// so a diff never shows it. opscope gives it its launcher's iteration like any other stream.
// The CPU side agrees with HTA; the GPU side is HTA's plus the stream-0 work.
TEST(AnalyzeDiffAgainstHta, Stream0GpuWorkIsCompared) {
  const std::string dir = kTraces + "amd_trace";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::string why;
  const nlohmann::json want_cpu = hta_diff(dir, dir, "--test-iteration 2 --device cpu", why);
  if (!why.empty()) GTEST_SKIP() << why;
  expect_same_rows(want_cpu["ops_diff"],
                   ours_diff(dir, dir, "--test-iteration 2 --device cpu")["ops_diff"], "amd cpu");
  const nlohmann::json want_gpu = hta_diff(dir, dir, "--test-iteration 2 --device gpu", why);
  const nlohmann::json got_gpu = ours_diff(dir, dir, "--test-iteration 2 --device gpu");
  EXPECT_TRUE(want_gpu["ops_diff"].empty())
      << "HTA now gives stream-0 work an iteration: compare the GPU side too";
  ASSERT_GE(got_gpu["ops_diff"].size(), 10u);
  // Step 1 launched them all; step 2 (49 us, the last) launched none.
  for (const auto& row : got_gpu["ops_diff"]) {
    EXPECT_GT(row["Control_counts"].get<double>(), 0) << row;
    EXPECT_EQ(row["Test_counts"].get<double>(), 0) << row;
  }
}

// A trace whose GPU copy of a step annotation (gpu_user_annotation "ProfilerStep#1", on the
// GPU's timeline) lasts into the host's next step. HTA takes that copy as a step span too, and
// the later one in the file wins, so a CPU op the host ran in step 2 counts for step 1. opscope
// takes the host's steps only.
TEST(AnalyzeDiffAgainstHta, OnlyHostStepsDefineIterations) {
  const fs::path dir = scratch("gpu_step_copy");
  fs::create_directories(dir);
  std::ofstream(dir / "rank0.json") << R"({"distributedInfo": {"rank": 0}, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1100, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1120, "dur": 10},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1125, "dur": 4, "args": {"correlation": 5}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1160, "dur": 8, "args": {"stream": 7, "correlation": 5}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 1050, "dur": 100}
  ]})";
  const nlohmann::json got =
      ours_diff(dir.string(), dir.string(), "--control-iteration 1 --test-iteration 2");
  // ProfilerStep#1 (the host's and the GPU's), ProfilerStep#2, aten::mm, the launch, gemm.
  ASSERT_EQ(got["ops_diff"].size(), 5u) << got;
  for (const auto& row : got["ops_diff"]) {
    if (row["name"] == "aten::mm" || row["name"] == "gemm") {
      EXPECT_EQ(row["Control_counts"], 0);
      EXPECT_EQ(row["Test_counts"], 1);
    }
  }
  std::string why;
  const nlohmann::json want =
      hta_diff(dir.string(), dir.string(), "--control-iteration 1 --test-iteration 2", why);
  if (!why.empty()) GTEST_SKIP() << why;
  bool hta_put_it_in_step_1 = false;
  for (const auto& row : want["ops_diff"]) {
    if (row["name"] == "aten::mm") hta_put_it_in_step_1 = row["Control_counts"] == 1;
  }
  EXPECT_TRUE(hta_put_it_in_step_1) << "HTA now takes host steps only: compare the rows";
}

// HTA's shorten_name on names from the traces and its edge cases.
TEST(AnalyzeDiff, ShortenNameAsHta) {
  EXPECT_EQ(shorten_name("void at::native::vectorized_elementwise_kernel<4, "
                         "at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3> >(int, "
                         "at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3>)"),
            "at::native::vectorized_elementwise_kernel");
  EXPECT_EQ(shorten_name("Memcpy HtoD (Pinned -> Device)"), "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(shorten_name("aten::add_"), "aten::add_");
  EXPECT_EQ(shorten_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)"),
            "ncclKernel_AllReduce_RING_LL_Sum_float");
  EXPECT_EQ(shorten_name("std::vector<int> f(x) -> int"), "int");  // "->" removed first
}

TEST(AnalyzeDiffCli, LabelsFormatsAndHelp) {
  const std::string base = kTraces + "trace_compare/base";
  const std::string test = kTraces + "trace_compare/test";
  if (!fs::exists(base)) GTEST_SKIP() << "no " << base;
  nlohmann::json got = ours_diff(base, test, "--labels before,after");
  ASSERT_FALSE(got["ops_diff"].empty());
  EXPECT_TRUE(got["ops_diff"][0].contains("before_total_duration")) << got["ops_diff"][0];
  EXPECT_TRUE(got["ops_diff"][0].contains("after_counts"));
  // Equal labels would make equal columns: the test side's gets "_test".
  got = ours_diff(base, test, "--labels run,run");
  EXPECT_TRUE(got["ops_diff"][0].contains("run_test_counts")) << got["ops_diff"][0];

  auto [code, text] = shell(kCli + " analyze diff " + base + " " + test + " --format csv");
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("# ops_diff\nname,Control_counts,Control_total_duration,Test_counts,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# ops_summary\ncategory,name\nunchanged,"), std::string::npos) << text;

  std::tie(code, text) = shell(kCli + " analyze diff --help");
  EXPECT_EQ(code, 0);
  EXPECT_NE(text.find("usage: opscope analyze diff CONTROL TEST"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze diff a b --help");
  EXPECT_NE(text.find("usage: opscope analyze diff"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze --help");
  EXPECT_NE(text.find("opscope analyze diff CONTROL TEST"), std::string::npos) << text;
}

TEST(AnalyzeDiffCli, BadInputIsRefusedWithTheValueAndWhatIsAllowed) {
  const std::string base = kTraces + "trace_compare/base";
  const std::string test = kTraces + "trace_compare/test";
  if (!fs::exists(base)) GTEST_SKIP() << "no " << base;
  auto [code, text] = shell(kCli + " analyze diff " + base);
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("expects two traces"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze diff " + base + " " + test + " --device tpu");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("cpu, gpu or all, got 'tpu'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze diff " + base + " " + test + " --labels x");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("got 'x'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze diff " + base + " " + test + " --test-rank a");
  EXPECT_EQ(code, 2);
  // A rank or iteration the trace lacks: what it has instead (HTA raises ValueError).
  const fs::path out = scratch("diff_never.json");
  fs::remove(out);
  std::tie(code, text) = shell(kCli + " analyze diff " + base + " " + test +
                               " --test-iteration 5 --output " + out.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("Test trace has no iteration 5 (--test-iteration); it has iterations "
                      "1009, 1010"),
            std::string::npos)
      << text;
  EXPECT_FALSE(fs::exists(out));
  std::tie(code, text) = shell(kCli + " analyze diff " + base + " " + test + " --control-rank 0");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("Control trace has no rank 0 (--control-rank); it has rank 1"),
            std::string::npos)
      << text;
  std::tie(code, text) = shell(kCli + " analyze diff " + kTraces + "critical_path/alexnet " + test);
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("Control trace has no ProfilerStep#N"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze diff /nonexistent " + test);
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("no such control trace file or directory: /nonexistent"), std::string::npos)
      << text;
}

}  // namespace analyze_diff_test
}  // namespace opscope

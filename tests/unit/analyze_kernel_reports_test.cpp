// `opscope analyze --report launch,kernel-dist,patterns` against Holistic Trace Analysis run
// live (tests/peers/hta_report.py) on the real traces in ../shared/peers/kineto-traces, and
// checked against the traces' own events where HTA has no table to compare with.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "opscope/export.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"

namespace opscope {
namespace analyze_kernel_reports_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::expect_rows_match;
using tests::hta;
using tests::kCli;
using tests::kPeers;
using tests::ours;
using tests::read_json;
using tests::scratch;

std::string trace_dir(const std::string& d) { return kPeers + "/kineto-traces/" + d; }

// HTA's "patterns" for one operator: hta_report.py reads the operator and the shortest
// pattern from the environment (HTA has no default operator), which hta() passes on.
nlohmann::json hta_patterns(const std::string& dir, const std::string& op, int min_len,
                            std::string& why) {
  ::setenv("OPSCOPE_HTA_OPERATOR", op.c_str(), 1);
  ::setenv("OPSCOPE_HTA_MIN_PATTERN_LEN", std::to_string(min_len).c_str(), 1);
  nlohmann::json out = hta(dir, "patterns", why);
  ::unsetenv("OPSCOPE_HTA_OPERATOR");
  ::unsetenv("OPSCOPE_HTA_MIN_PATTERN_LEN");
  return out;
}

// HTA lists the launches in the trace file's order of the runtime calls (Kineto's buffer
// order, not time order, and not kept by a read trace); opscope in the order they began. The
// rows are compared by rank and correlation id.
nlohmann::json by_correlation(nlohmann::json rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a["rank"].template get<std::int64_t>(),
                          a["correlation"].template get<std::int64_t>()) <
           std::make_pair(b["rank"].template get<std::int64_t>(),
                          b["correlation"].template get<std::int64_t>());
  });
  return rows;
}

// Per-launch rows, and the per-rank counts its
// histograms show, on every trace directory HTA loads with GPU work: the ROCm one has none
// (HTA pairs no hip* calls, so neither does opscope: empty, and NaN medians), NCCL's has float
// timestamps, three leave out the last profiler step.
TEST(AnalyzeKernelReportsAgainstHta, LaunchStatsOnRealTraces) {
  int compared = 0;
  for (const std::string d :
       {"trace_filter", "nccl_parser_config", "amd_trace", "trace_compare/base",
        "critical_path/alexnet", "critical_path/simple_add"}) {
    const std::string dir = trace_dir(d);
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir, "launch", why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours(dir, "launch");
    expect_rows_match(by_correlation(want["launch"]), by_correlation(got["launch"]), d);
    expect_rows_match(want["launch_summary"], got["launch_summary"], d + " summary");
    if (d == "trace_filter") {
      ASSERT_EQ(got["launch_summary"].size(), 2u);  // both ranks, not HTA's default rank 0
      EXPECT_GT(got["launch_summary"][0]["short_kernels"].get<int>(), 0);
      EXPECT_GT(got["launch_summary"][0]["launch_delay_outliers"].get<int>(), 0);
    }
    ++compared;
  }
  EXPECT_EQ(compared, 6);
}

// The settings HTA's plots take: without memory events the rows launched by cudaMemcpyAsync and
// cudaMemsetAsync go and nothing else changes; the cutoffs decide the summary's counts.
TEST(AnalyzeKernelReports, LaunchSettings) {
  const std::string dir = trace_dir("trace_filter");
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  std::set<std::int64_t> memory_calls;  // correlation ids of the copy and set calls
  for (const char* file : {"/sampled_rank-0.json.gz", "/sampled_rank-1.json.gz"}) {
    const auto r = read_trace(dir + file);
    for (const Event& e : r->events()) {
      const EventDetail* d = r->detail(e);
      if ((e.name == "cudaMemcpyAsync" || e.name == "cudaMemsetAsync") && d != nullptr)
        memory_calls.insert(d->gpu.correlation);
    }
  }
  ASSERT_FALSE(memory_calls.empty());
  const nlohmann::json all = ours(dir, "launch");
  const nlohmann::json kernels_only = ours(dir, "launch", "--no-memory-events");
  nlohmann::json expected = nlohmann::json::array();
  for (const auto& row : all["launch"]) {
    if (!memory_calls.contains(row["correlation"].get<std::int64_t>())) expected.push_back(row);
  }
  EXPECT_LT(expected.size(), all["launch"].size());
  EXPECT_EQ(kernels_only["launch"], expected);

  const nlohmann::json cut = ours(dir, "launch", "--runtime-cutoff 8 --launch-delay-cutoff=2000");
  std::map<std::int64_t, std::tuple<int, int, int, int>> counts;  // by rank
  for (const auto& row : cut["launch"]) {
    const double cpu = row["cpu_duration"], gpu = row["gpu_duration"], delay = row["launch_delay"];
    auto& [launches, short_kernels, runtime, delays] = counts[row["rank"].get<std::int64_t>()];
    ++launches;
    short_kernels += cpu <= 8 && gpu < cpu;
    runtime += cpu > 8;
    delays += delay > 2000;
  }
  ASSERT_EQ(cut["launch_summary"].size(), counts.size());
  for (const auto& s : cut["launch_summary"]) {
    const auto [launches, short_kernels, runtime, delays] = counts[s["rank"].get<std::int64_t>()];
    EXPECT_EQ(s["launches"], launches);
    EXPECT_EQ(s["short_kernels"], short_kernels);
    EXPECT_EQ(s["runtime_outliers"], runtime);
    EXPECT_GT(runtime, 0);  // the cutoff moved: at the default 50 us there are none
    EXPECT_EQ(s["launch_delay_outliers"], delays);
  }
}

// The distributions of the kernels HTA charts one by one. HTA's own table keeps only their
// totals past num_kernels kernels (it overwrites the rest, see analyze_test.cpp), so the
// oracle takes the kernels HTA picks and computes their statistics from HTA's rank
// DataFrames: the choice and the numbers both come from HTA.
TEST(AnalyzeKernelReportsAgainstHta, KernelDistributionOnRealTraces) {
  for (const std::string d :
       {"trace_filter", "nccl_parser_config", "amd_trace", "critical_path/alexnet"}) {
    const std::string dir = trace_dir(d);
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir, "kernel-dist", why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours(dir, "kernel-dist");
    ASSERT_FALSE(got["kernel_dist"].empty()) << d;
    expect_rows_match(want["kernel_dist"], got["kernel_dist"], d);
  }
}

// Each row against the trace's events: as many as the trace has of that kernel on that rank,
// summing to their durations, with ordered quartiles; and the kernels are exactly the named
// rows of the "kernels" report.
TEST(AnalyzeKernelReports, KernelDistributionIsTheTracesKernels) {
  const std::string dir = trace_dir("trace_filter");
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  // Every step kept, so that every event of the trace counts.
  const nlohmann::json got = ours(dir, "kernel-dist,kernels", "--include-last-step");
  std::map<std::pair<std::int64_t, std::string>, std::pair<int, double>> in_trace;
  for (const char* file : {"/sampled_rank-0.json.gz", "/sampled_rank-1.json.gz"}) {
    const auto r = read_trace(dir + file);
    for (const Event& e : r->events()) {
      if (e.kind != EventKind::kKernel && e.kind != EventKind::kMemcpy &&
          e.kind != EventKind::kMemset) {
        continue;
      }
      auto& [count, sum] = in_trace[{r->rank(), std::string(e.name)}];
      ++count;
      sum += (e.end_ns - e.start_ns) / 1000.0;
    }
  }
  std::set<std::pair<std::string, std::string>> named, shown;
  for (const auto& row : got["kernels"]) {
    if (row["name"] != "others") {
      named.insert({row["kernel_type"].get<std::string>(), row["name"].get<std::string>()});
    }
  }
  ASSERT_GT(got["kernel_dist"].size(), 10u);
  for (const auto& row : got["kernel_dist"]) {
    shown.insert({row["kernel_type"].get<std::string>(), row["name"].get<std::string>()});
    const auto [count, sum] =
        in_trace.at({row["rank"].get<std::int64_t>(), row["name"].get<std::string>()});
    EXPECT_EQ(row["count"], count) << row;
    EXPECT_NEAR(row["sum (us)"].get<double>(), sum, 1e-6) << row;
    EXPECT_NEAR(row["mean (us)"].get<double>() * count, sum, 1e-6) << row;
    double last = row["min (us)"];
    for (const char* column : {"25%", "50%", "75%", "max (us)"}) {
      EXPECT_LE(last, row[column].get<double>()) << row;
      last = row[column];
    }
  }
  EXPECT_EQ(shown, named);
}

// Without an operator (HTA requires one) every top-level operator is a root. On trace_filter
// that is the main thread's step alone: the backward thread's operators hang under it, and the
// other threads launch nothing. So the patterns are the ones HTA finds for "ProfilerStep"
// (`step_patterns`), each with at least the default three kernels.
void expect_step_patterns_without_a_name(const std::string& dir,
                                         const nlohmann::json& step_patterns) {
  const nlohmann::json got = ours(dir, "patterns");
  ASSERT_EQ(step_patterns.size(), 2u);  // one per rank
  for (const auto& w : step_patterns) {
    int found = 0;
    for (const auto& g : got["patterns"]) {
      if (g["rank"] == w["rank"] && g["pattern"] == w["pattern"]) {
        ++found;
        EXPECT_EQ(g["count"], w["count"]);
        EXPECT_NEAR(g["GPU kernel duration (us)"].get<double>(),
                    w["GPU kernel duration (us)"].get<double>(), 1.0);
      }
    }
    EXPECT_EQ(found, 1) << w["pattern"].get<std::string>().substr(0, 80);
  }
  EXPECT_EQ(got["patterns"].size(), step_patterns.size());
  for (const auto& g : got["patterns"]) {
    const std::string pattern = g["pattern"];
    EXPECT_GE(std::count(pattern.begin(), pattern.end(), '|'), 3) << pattern;
  }
}

// Kernel sequences compared as strings, with their counts and durations, for operators HTA
// finds patterns under: the backward ops (moved under the main thread's step, one level down),
// whole profiler steps (where the backward thread's kernels join the step's), convolutions
// and linear layers, and shorter patterns; on traces with integer and float timestamps.
TEST(AnalyzeKernelReportsAgainstHta, FrequentKernelSequencesOnRealTraces) {
  struct Case {
    std::string dir, op;
    int min_len;
    std::size_t at_least;  // patterns HTA finds there
  };
  const std::vector<Case> cases = {
      {"trace_filter", "autograd", 3, 20},
      {"trace_filter", "autograd", 1, 150},
      {"trace_filter", "ProfilerStep", 3, 2},
      {"trace_filter", "aten::", 3, 0},  // the shallowest aten:: ops launch too few
      {"nccl_parser_config", "autograd", 3, 10},
      {"critical_path/alexnet", "aten::conv2d", 3, 5},
      {"critical_path/alexnet", "aten::linear", 3, 1},
      {"critical_path/simple_add", "aten::add", 1, 2},
  };
  for (const Case& c : cases) {
    const std::string dir = trace_dir(c.dir);
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta_patterns(dir, c.op, c.min_len, why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got =
        ours(dir, "patterns",
             "--operator '" + c.op + "' --min-pattern-len=" + std::to_string(c.min_len));
    const std::string what = c.dir + " " + c.op + " " + std::to_string(c.min_len);
    EXPECT_GE(want["patterns"].size(), c.at_least) << what;
    // HTA sorts by count and then pattern, as opscope does: compared in order.
    ASSERT_EQ(got["patterns"].size(), want["patterns"].size()) << what;
    for (std::size_t i = 0; i < want["patterns"].size(); ++i) {
      EXPECT_EQ(got["patterns"][i]["pattern"], want["patterns"][i]["pattern"]) << what << i;
    }
    expect_rows_match(want["patterns"], got["patterns"], what);
    if (c.op == "ProfilerStep") expect_step_patterns_without_a_name(dir, want["patterns"]);
  }
}

TEST(AnalyzeKernelReports, SettingsAreListedAndCheckedOnTheCommandLine) {
  auto [code, text] = shell(kCli + " analyze --help");
  EXPECT_EQ(code, 0);
  for (const char* s :
       {"--runtime-cutoff US", "--launch-delay-cutoff US", "--no-memory-events", "--operator NAME",
        "--min-pattern-len N", "launch ", "kernel-dist ", "patterns "}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
  std::tie(code, text) = shell(kCli + " analyze x.json --report patterns --min-pattern-len 0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("--min-pattern-len expects a number from 1 to"), std::string::npos) << text;
  EXPECT_NE(text.find("got '0'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --report launch --runtime-cutoff fast");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("got 'fast'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --no-memory-events=1");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("--no-memory-events takes no value"), std::string::npos) << text;
}

}  // namespace analyze_kernel_reports_test
}  // namespace opscope

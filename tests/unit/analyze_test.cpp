// `opscope analyze`: its reports against Holistic Trace Analysis itself (../shared/peers/hta,
// run live on Debian's pandas) on the real traces in ../shared/peers/kineto-traces, and its
// command line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "opscope/export.h"
#include "opscope/report_output.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"
#include "trace_inputs.h"

namespace opscope {
namespace analyze_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::expect_rows_match;
using tests::hta;
using tests::in_key_order;
using tests::kCli;
using tests::kPeers;
using tests::ours;
using tests::read_json;
using tests::scratch;

// Every trace directory HTA can load as a job, with GPU kernels: A100/H100 ranks, a ROCm
// job, NCCL collectives with float timestamps, single ranks of other jobs. Three of them
// have two or more ProfilerStep#N, so both leave out the last step and what it launched.
void expect_report_matches_hta(const std::string& report) {
  const std::vector<std::string> dirs = {"trace_filter",
                                         "amd_trace",
                                         "nccl_parser_config",
                                         "trace_compare/base",
                                         "trace_compare/test",
                                         "critical_path/alexnet",
                                         "critical_path/simple_add"};
  int compared = 0;
  for (const std::string& d : dirs) {
    const std::string dir = kPeers + "/kineto-traces/" + d;
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir, report, why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours(dir, report);
    expect_rows_match(want[report], got[report], d);
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(dirs.size()));
}

TEST(AnalyzeAgainstHta, TemporalBreakdownOnRealTraces) { expect_report_matches_hta("temporal"); }

// Host waits, kernel waits and other gaps per stream, for every rank (HTA by default does
// rank 0 only; the comparison asks it for all).
TEST(AnalyzeAgainstHta, IdleTimeBreakdownOnRealTraces) { expect_report_matches_hta("idle"); }

// The AMD trace has no communication kernels: both answer NaN (null), not 0.
TEST(AnalyzeAgainstHta, CommCompOverlapOnRealTraces) { expect_report_matches_hta("overlap"); }

// Kernel time by type (and by overlapping types), and the top kernels per rank and type.
// Where HTA aggregates a type's tail into "others" it also overwrites every kept kernel's
// max, min and mean with its total and its stddev with 0 (it regroups the per-kernel totals);
// opscope keeps their real statistics, so for those rows only the total is compared, and the
// rest is checked for consistency.
TEST(AnalyzeAgainstHta, GpuKernelBreakdownOnRealTraces) {
  int hta_overwrote = 0;
  for (const std::string d :
       {"trace_filter", "nccl_parser_config", "amd_trace", "critical_path/alexnet"}) {
    const std::string dir = kPeers + "/kineto-traces/" + d;
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir, "kernels", why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours(dir, "kernels");
    // HTA labels pieces of no length where a type ends as another starts; they add nothing.
    const auto nonzero = [](const nlohmann::json& rows) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& row : rows) {
        if (row["sum"].get<double>() > 0) out.push_back(row);
      }
      return out;
    };
    expect_rows_match(nonzero(want["kernel_type"]), nonzero(got["kernel_type"]), d);
    nlohmann::json want_kernels = want["kernels"];
    const nlohmann::json got_kernels = in_key_order(got["kernels"]);
    want_kernels = in_key_order(want_kernels);
    ASSERT_EQ(got_kernels.size(), want_kernels.size()) << d;
    for (std::size_t i = 0; i < want_kernels.size(); ++i) {
      nlohmann::json& w = want_kernels[i];
      const nlohmann::json& g = got_kernels[i];
      const double sum = w["sum (us)"].get<double>();
      const bool overwritten = w["name"] != "others" && w["max (us)"].get<double>() == sum &&
                               w["min (us)"].get<double>() == sum &&
                               g["max (us)"].get<double>() < sum;
      if (overwritten) {
        ++hta_overwrote;
        EXPECT_LE(g["min (us)"].get<double>(), g["mean (us)"].get<double>());
        EXPECT_LE(g["mean (us)"].get<double>(), g["max (us)"].get<double>());
        for (const char* column : {"max (us)", "min (us)", "mean (us)", "stddev"}) {
          w[column] = g[column];  // compared above instead
        }
      }
    }
    expect_rows_match(want_kernels, got_kernels, d + " kernels");
  }
  EXPECT_GT(hta_overwrote, 0) << "HTA now keeps the statistics of kept kernels: compare them";
}

// Where opscope differs from HTA on purpose: triton's CPU ops carry "stream": 0 in their
// args, and HTA takes every event with a stream for GPU work, so its kernel time there is the
// CPU op's time. opscope counts the one kernel the trace has.
TEST(AnalyzeAgainstHta, TritonCpuOpsAreNotGpuWork) {
  const std::string dir = kPeers + "/kineto-traces/triton_example";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const auto r = read_trace(dir + "/triton_example.json.gz");
  std::int64_t kernel_ns = 0;
  int kernels = 0;
  for (const Event& e : r->events()) {
    if (e.kind == EventKind::kKernel) {
      kernel_ns += e.end_ns - e.start_ns;
      ++kernels;
    }
  }
  ASSERT_EQ(kernels, 1);
  const nlohmann::json got = ours(dir, "temporal");
  EXPECT_NEAR(got["temporal"][0]["kernel_time(us)"].get<double>(), kernel_ns / 1000.0, 1e-6);
  std::string why;
  const nlohmann::json want = hta(dir, "temporal", why);
  if (!why.empty()) GTEST_SKIP() << why;
  EXPECT_GT(want["temporal"][0]["kernel_time(us)"].get<double>(),
            got["temporal"][0]["kernel_time(us)"].get<double>() * 10)
      << "HTA no longer counts CPU ops with a stream arg as GPU work: compare them instead";
}

// HTA's last-step cut, on a trace made to test it: GPU work counts when the CPU event that
// launched it (same correlation) started before the last ProfilerStep, and GPU work without a
// correlation counts when some CPU event without one did. Two threads launch, their
// correlations interleaved, so the launches are not in correlation order in the model.
TEST(AnalyzeCli, LastStepCutKeepsWhatWasLaunchedBeforeIt) {
  const std::string path = scratch("last_step_cut.json");
  const auto op = [](const char* name, int tid, int ts, int dur) {
    return std::string(R"({"ph":"X","cat":"user_annotation","name":")") + name +
           R"(","pid":1,"tid":)" + std::to_string(tid) + R"(,"ts":)" + std::to_string(ts) +
           R"(,"dur":)" + std::to_string(dur) + "}";
  };
  const auto launch = [](int tid, int ts, int correlation) {
    return R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":)" +
           std::to_string(tid) + R"(,"ts":)" + std::to_string(ts) +
           R"(,"dur":2,"args":{"correlation":)" + std::to_string(correlation) + "}}";
  };
  const auto kernel = [](int ts, int dur, int correlation) {
    std::string args = R"("stream":7,"device":0)";
    if (correlation >= 0) args += R"(,"correlation":)" + std::to_string(correlation);
    return R"({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":)" + std::to_string(ts) +
           R"(,"dur":)" + std::to_string(dur) + R"(,"args":{)" + args + "}}";
  };
  // The correlations as Kineto numbers them (dense: the cut keeps them as a bitmap), and
  // spread far apart (kept sorted instead).
  for (const std::int64_t spread : {1, 100000}) {
    SCOPED_TRACE(spread);
    const auto c = [&](int n) { return static_cast<int>(n * spread); };
    std::ofstream(path) << "{\"traceEvents\":[" << op("ProfilerStep#1", 10, 0, 100) << ","
                        << op("ProfilerStep#2", 10, 100, 100) << "," << launch(11, 10, c(6)) << ","
                        << launch(11, 20, c(8)) << "," << launch(12, 15, c(7)) << ","
                        << launch(12, 150, c(9)) << "," << kernel(30, 10, c(6)) << ","
                        << kernel(40, 10, c(7)) << "," << kernel(60, 20, c(8)) << ","
                        << kernel(90, 5, -1) << ","
                        << kernel(160, 30, c(9))
                        // Launched by nothing in the trace, below and above the launches' ids.
                        << "," << kernel(110, 10, c(5)) << "," << kernel(125, 10, c(10)) << "]}";
    const std::vector<std::string> paths{path};
    const auto ranks = read_traces(paths);
    const Report got = temporal_breakdown(ranks);
    ASSERT_EQ(got.rows.size(), 1u);
    // Kept: [30, 50), [60, 80), [90, 95) (correlations 6, 7, 8 and the one without); the
    // kernel launched at 150, after the last step began at 100, is left out, and so are the
    // two no launch before the cut has.
    const auto cell = [&](const char* column) {
      const auto at = std::find(got.columns.begin(), got.columns.end(), column);
      return std::get<double>(got.rows[0][static_cast<std::size_t>(at - got.columns.begin())]);
    };
    EXPECT_DOUBLE_EQ(cell("kernel_time(us)"), 65.0);
    EXPECT_DOUBLE_EQ(cell("idle_time(us)"), 20.0);
    EXPECT_DOUBLE_EQ(cell("compute_time(us)"), 45.0);
  }
}

// Each report is the same from a read that keeps only what its ReportKind says it reads (what
// `opscope analyze` reads for it) as from a whole read, on the real traces: a report that reads
// something more without saying so fails here.
TEST(AnalyzeCli, EachReportIsTheSameFromWhatItReads) {
  const std::vector<std::string> dirs = {"trace_filter",          "amd_trace", "nccl_parser_config",
                                         "critical_path/alexnet", "cpu_only",  "triton_example"};
  int compared = 0;
  for (const std::string& d : dirs) {
    const std::string dir = kPeers + "/kineto-traces/" + d;
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
    const std::vector<std::string> paths = cli::trace_files({dir});
    const auto whole = read_traces(paths);
    for (const ReportKind& kind : report_kinds()) {
      SCOPED_TRACE(d + ", " + std::string(kind.name));
      const std::vector<std::string> report{std::string(kind.name)};
      const auto part = read_traces(paths, 0, what_reports_read(report));
      const std::string want =
          format_reports(run_report(kind.name, whole, {}), ReportFormat::kJson);
      EXPECT_EQ(format_reports(run_report(kind.name, part, {}), ReportFormat::kJson), want);
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(dirs.size() * report_kinds().size()));
}

// A trace without GPU work (HTA raises IndexError) gives zeros, under the trace's own rank.
TEST(AnalyzeCli, TraceWithoutKernelsGivesZeros) {
  const std::string dir = kPeers + "/kineto-traces/cpu_only";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const nlohmann::json got = ours(dir, "temporal");
  ASSERT_EQ(got["temporal"].size(), 1u);
  EXPECT_EQ(got["temporal"][0]["rank"], 34);
  EXPECT_EQ(got["temporal"][0]["kernel_time(us)"], 0);
}

TEST(AnalyzeCli, TextCsvAndOutputFile) {
  const std::string dir = kPeers + "/kineto-traces/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  auto [code, text] = shell(kCli + " analyze " + dir);
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("temporal\nrank  idle_time(us)"), std::string::npos) << text;
  EXPECT_NE(text.find("53.56"), std::string::npos) << text;

  std::tie(code, text) = shell(kCli + " analyze " + dir + " --format csv --report temporal,ops");
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("# temporal\nrank,idle_time(us),"), std::string::npos) << text;
  EXPECT_NE(text.find("# ops\nrank,Name,Self CPU %"), std::string::npos) << text;

  std::tie(code, text) = shell(kCli + " analyze " + dir + " --report ops");
  EXPECT_EQ(code, 0);
  EXPECT_NE(text.find("ops, rank 0"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find("Self CPU %"), std::string::npos);

  const fs::path out = scratch("report.json");
  std::tie(code, text) =
      shell(kCli + " analyze " + dir + " --format=json --output " + out.string());
  EXPECT_EQ(code, 0) << text;
  EXPECT_EQ(read_json(out)["temporal"].size(), 2u);
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

// --threads: a plain trace over 1 MiB read on one thread and on two (its pieces parsed by a
// second one) gives the same reports; a count outside 1 to 1024 is refused.
TEST(AnalyzeCli, ThreadsChangeHowNotWhat) {
  const std::string gz = kPeers + "/kineto-traces/nccl_parser_config/nccl_data.json.gz";
  if (!fs::exists(gz)) GTEST_SKIP() << "no " << gz;
  const fs::path plain = scratch("threads/nccl.json");
  fs::create_directories(plain.parent_path());
  std::ofstream(plain, std::ios::binary) << testing::read_gzip_file(gz);
  ASSERT_GT(fs::file_size(plain), 1u << 20);
  const std::string reports = " --report temporal,idle,kernels,overlap,launch,ops --format json";
  const auto [one_code, one] =
      shell(kCli + " analyze " + plain.string() + reports + " --threads 1");
  EXPECT_EQ(one_code, 0) << one;
  const auto [two_code, two] =
      shell(kCli + " analyze " + plain.string() + reports + " --threads 2");
  EXPECT_EQ(two_code, 0) << two;
  EXPECT_GT(one.size(), 10000u);
  EXPECT_EQ(one, two);
  auto [code, text] = shell(kCli + " analyze " + plain.string() + " --threads 0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("--threads expects a number from 1 to 1024, got '0'"), std::string::npos)
      << text;
}

TEST(AnalyzeCli, BadInputIsRefusedWithTheValueAndWhatIsAllowed) {
  auto [code, text] = shell(kCli + " analyze");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("no trace given"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --report temporal,nope");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("'nope'"), std::string::npos) << text;
  EXPECT_NE(
      text.find(
          "temporal, idle, kernels, kernel-dist, overlap, launch, patterns, queue, counters, ops"),
      std::string::npos)
      << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --format xml");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("text, json, csv or html, got 'xml'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze /nonexistent/trace.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("no such trace file or directory: /nonexistent/trace.json"),
            std::string::npos)
      << text;
  const fs::path empty = scratch("empty_dir");
  fs::create_directories(empty);
  std::tie(code, text) = shell(kCli + " analyze " + empty.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("no .json or .json.gz trace"), std::string::npos) << text;
  const fs::path bad = scratch("bad.json");
  std::ofstream(bad) << "{\"traceEvents\": [";
  const fs::path out = scratch("never.json");
  std::tie(code, text) = shell(kCli + " analyze " + bad.string() + " --output " + out.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("byte"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(out)) << "a failed analysis leaves no output file";
  std::tie(code, text) = shell(kCli + " analyze --help");
  EXPECT_EQ(code, 0);
  EXPECT_NE(text.find("usage: opscope analyze PATH..."), std::string::npos) << text;
}

}  // namespace analyze_test
}  // namespace opscope

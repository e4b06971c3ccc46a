// TraceReadOptions::times (opscope/trace_reader.h): a trace's times held as HTA holds them.
// HTA's rounding (hta/common/trace_parser.py round_down_time_stamps) moves each event inward to
// whole microseconds in doubles, only when the trace's ts column is float; with
// HTA_DISABLE_NS_ROUNDING=1 each ts is the double Python reads. The expected values are what
// Python computes from the same texts (math.ceil(float(ts)), math.floor(float(ts) +
// float(dur))); python/tests/test_hta_numbers.py compares the reports with HTA itself.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "import/trace_times.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace hta_times_test {

namespace fs = std::filesystem;

std::string write_trace(const std::string& name, const std::string& events) {
  static const testing::TempDir dir;
  const fs::path p = dir.path() / name;
  std::ofstream(p, std::ios::binary) << R"({"traceEvents": [)" << events << "]}";
  return p.string();
}

std::shared_ptr<const ProfilerResult> read(const std::string& path, TraceTimes times) {
  TraceReadOptions options;
  options.times = times;
  const std::string paths[] = {path};
  return read_traces(paths, 1, options).front();
}

// The (start, end) of the events named `name`, in the model's order.
std::vector<std::pair<std::int64_t, std::int64_t>> times_of(const ProfilerResult& r,
                                                            std::string_view name) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const Event& e : r.events()) {
    if (e.name == name) out.emplace_back(e.start_ns, e.end_ns);
  }
  return out;
}

const char* const kFractional =
    R"({"ph":"X","cat":"kernel","name":"short","pid":0,"tid":7,"ts":10.3,"dur":0.5,)"
    R"("args":{"stream":7,"device":0}},)"
    R"({"ph":"X","cat":"kernel","name":"long","pid":0,"tid":7,"ts":20.25,"dur":3.5,)"
    R"("args":{"stream":7,"device":0}},)"
    R"({"ph":"X","cat":"cpu_op","name":"whole","pid":1,"tid":1,"ts":30,"dur":2},)"
    R"({"ph":"i","cat":"cpu_instant_event","name":"mark","pid":1,"tid":1,"ts":40.001,"s":"t"})";

TEST(HtaTimes, RoundsEachEventInwardWhenTheTsColumnIsFloat) {
  const std::string path = write_trace("fractional.json", kFractional);
  const auto ns = read(path, TraceTimes::kNanoseconds);
  EXPECT_EQ(times_of(*ns, "short"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{10300, 10800}}));
  const auto hta = read(path, TraceTimes::kHtaRounded);
  // ceil(10.3) = 11, floor(10.8) = 10: a negative duration, kept as HTA keeps it.
  EXPECT_EQ(times_of(*hta, "short"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{11000, 10000}}));
  EXPECT_EQ(times_of(*hta, "long"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{21000, 23000}}));
  EXPECT_EQ(times_of(*hta, "whole"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{30000, 32000}}));
  // No dur: ceil(ts) for both ends.
  EXPECT_EQ(times_of(*hta, "mark"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{41000, 41000}}));
}

TEST(HtaTimes, LeavesATraceWithWholeTsAsWrittenEvenWithFractionalDurs) {
  // trace_filter's traces: integer ts, fractional dur; pandas reads an int64 ts column and HTA
  // does not round.
  const std::string path = write_trace(
      "whole_ts.json", R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":0.5,)"
                       R"("args":{"stream":7,"device":0}})");
  for (const TraceTimes t : {TraceTimes::kHtaRounded, TraceTimes::kHtaFloat}) {
    EXPECT_EQ(times_of(*read(path, t), "k"),
              (std::vector<std::pair<std::int64_t, std::int64_t>>{{10000, 10500}}));
  }
}

TEST(HtaTimes, AnEventWithoutTsMakesTheColumnFloat) {
  // A metadata event without "ts" is NaN in HTA's frame: float64, so the rest is rounded.
  const std::string path = write_trace(
      "no_ts.json", R"({"ph":"M","name":"process_name","pid":0,"args":{"name":"gpu"}},)"
                    R"({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":10,"dur":0.5})");
  EXPECT_EQ(times_of(*read(path, TraceTimes::kHtaRounded), "op"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{10000, 10000}}));
}

TEST(HtaTimes, UsesTheDoublesPythonReadsAtEpochMicroseconds) {
  // At 1.7e15 us a double steps by 0.25 us: Python reads 1682725898236567.1 as ...567.0, so
  // HTA's ceil is ...567 where the exact ceiling is ...568, and its float ts is ...567.0.
  const std::string path = write_trace(
      "epoch.json",
      R"({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":1682725898236567.100,)"
      R"("dur":5.3},)"
      R"({"ph":"X","cat":"cpu_op","name":"op2","pid":1,"tid":1,"ts":1682725898236567.200,)"
      R"("dur":1})");
  const std::int64_t base = std::int64_t{1682725898236567} * 1000;
  EXPECT_EQ(times_of(*read(path, TraceTimes::kHtaRounded), "op"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{base, base + 5000}}));
  // 567.2 reads as 567.25: ceil 568, floor(568.25) = 568.
  EXPECT_EQ(times_of(*read(path, TraceTimes::kHtaRounded), "op2"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{base + 1000, base + 1000}}));
  EXPECT_EQ(times_of(*read(path, TraceTimes::kHtaFloat), "op"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{base, base + 5300}}));
  EXPECT_EQ(times_of(*read(path, TraceTimes::kHtaFloat), "op2"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{base + 250, base + 1250}}));
  EXPECT_EQ(times_of(*read(path, TraceTimes::kNanoseconds), "op"),
            (std::vector<std::pair<std::int64_t, std::int64_t>>{{base + 100, base + 5400}}));
}

TEST(HtaTimes, CeilAndFloatOfOneTimeAsPythonComputesThem) {
  using import::hta_ceil_ns;
  using import::hta_float_ns;
  EXPECT_EQ(hta_ceil_ns(10300), 11000);
  EXPECT_EQ(hta_ceil_ns(-10300), -10000);
  EXPECT_EQ(hta_ceil_ns(10000), 10000);
  EXPECT_EQ(hta_float_ns(10300), 10300);  // small values: the double holds the ns
  // math.ceil(1712195498123456.124) == 1712195498123456 (the double is ...456.0).
  EXPECT_EQ(hta_ceil_ns(std::int64_t{1712195498123456124}), std::int64_t{1712195498123456000});
  EXPECT_EQ(hta_ceil_ns(std::int64_t{1712195498123456126}), std::int64_t{1712195498123457000});
}

}  // namespace hta_times_test
}  // namespace opscope

namespace opscope {
namespace hta_times_test {

// `opscope analyze --times hta` against HTA as it runs by default (rounding), and `--times
// hta-float` against HTA with HTA_DISABLE_NS_ROUNDING=1, on the real traces whose ts have
// fractions: the same rows, to the last digit HTA prints (its two-decimal columns within one
// hundredth: HTA's doubles tip a sum like 355484.555 either way).
void expect_times_match_hta(const std::string& report, const std::string& table) {
  using tests::hta;
  using tests::kPeers;
  using tests::ours;
  const std::vector<std::string> dirs = {"amd_trace", "nccl_parser_config"};
  for (const bool rounding : {true, false}) {
    for (const std::string& d : dirs) {
      const std::string dir = kPeers + "/kineto-traces/" + d;
      if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
      std::string why;
      const nlohmann::json want = hta(dir, report, why, rounding);
      if (!why.empty()) GTEST_SKIP() << why;
      const nlohmann::json got =
          ours(dir, report, rounding ? "--hta-rounding" : "--times hta-float");
      const std::string what = d + (rounding ? " rounded" : " hta-float");
      const nlohmann::json w = tests::in_key_order(want[table]);
      const nlohmann::json g = tests::in_key_order(got[table]);
      ASSERT_EQ(g.size(), w.size()) << what << "\nHTA: " << w << "\nopscope: " << g;
      for (std::size_t i = 0; i < w.size(); ++i) {
        for (const auto& [column, value] : w[i].items()) {
          SCOPED_TRACE(what + " row " + std::to_string(i) + " column " + column);
          if (!value.is_number()) {
            EXPECT_EQ(g[i][column], value);
            continue;
          }
          const double tolerance = rounding ? 1e-6 : 0.0101;
          EXPECT_NEAR(g[i][column].get<double>(), value.get<double>(), tolerance);
        }
      }
    }
  }
}

TEST(HtaTimesAgainstHta, TemporalBreakdown) { expect_times_match_hta("temporal", "temporal"); }
TEST(HtaTimesAgainstHta, IdleTimeBreakdown) { expect_times_match_hta("idle", "idle"); }
// The kernel types; the per-kernel table keeps its deliberate difference (README: HTA
// overwrites a named kernel's max, min and stddev with its total).
TEST(HtaTimesAgainstHta, GpuKernelTypes) { expect_times_match_hta("kernels", "kernel_type"); }

TEST(HtaTimesCli, SaysOnStandardErrorWhichTimesItUses) {
  const std::string dir = tests::kPeers + "/kineto-traces/amd_trace";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
  // Standard error alone (shell() adds standard output to what it reads).
  const auto plain =
      cli::tests::shell("{ " + tests::kCli + " analyze " + dir + " 2>&1 >/dev/null; }");
  EXPECT_EQ(plain.second.find("times"), std::string::npos) << plain.second;
  const auto rounded = cli::tests::shell("{ " + tests::kCli + " analyze " + dir +
                                         " --hta-rounding 2>&1 >/dev/null; }");
  EXPECT_NE(rounded.second.find("rounded inward to whole microseconds as HTA"), std::string::npos)
      << rounded.second;
  const auto bad = cli::tests::shell(tests::kCli + " analyze " + dir + " --times us 2>&1");
  EXPECT_EQ(bad.first, 2);
  EXPECT_NE(bad.second.find("--times expects ns, hta or hta-float, got 'us'"), std::string::npos)
      << bad.second;
}

}  // namespace hta_times_test
}  // namespace opscope

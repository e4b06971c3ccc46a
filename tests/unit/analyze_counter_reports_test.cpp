// The counters of `opscope analyze` (src/analysis/counter_series.cpp, reports/queue.cpp and
// reports/counters.cpp): the "queue" report (queue lengths, copy bandwidths, time blocked on a
// full queue) and --augment (the trace with counter events,
// src/export/trace_with_counters.cpp), against Holistic Trace Analysis
// itself (../shared/peers/hta, run live) on the real traces in ../shared/peers/kineto-traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "opscope/export.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/cli_test_support.h"
#include "support/hta_oracle.h"

namespace opscope {
namespace analyze_counter_reports_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::hta;
using tests::in_key_order;
using tests::kCli;
using tests::kPeers;
using tests::ours;
using tests::read_json;
using tests::scratch;

// The statistics of a describe() row: the count exactly, the rest within 1e-6 relative (both
// sum the same numbers in the same order; only ties at equal times could order them apart).
void expect_describe_rows_match(const nlohmann::json& want_rows, const nlohmann::json& got_rows,
                                const std::string& what) {
  const nlohmann::json want = in_key_order(want_rows);
  const nlohmann::json got = in_key_order(got_rows);
  ASSERT_EQ(got.size(), want.size()) << what << "\nHTA: " << want << "\nopscope: " << got;
  for (std::size_t i = 0; i < want.size(); ++i) {
    for (const auto& [column, value] : want[i].items()) {
      SCOPED_TRACE(what + " row " + std::to_string(i) + " column " + column);
      ASSERT_TRUE(got[i].contains(column)) << got[i];
      if (!value.is_number()) {  // the copy kind's name; null for the std of one value
        EXPECT_EQ(got[i][column], value);
        continue;
      }
      const double w = value.get<double>();
      EXPECT_NEAR(got[i][column].get<double>(), w, std::max(1e-9, 1e-6 * std::abs(w)));
    }
  }
}

// The trace directories with GPU work: A100 ranks with copies and two profiler steps (so the
// last is left out), NCCL with float timestamps, ROCm (whose launches name their stream
// "0x0"), a single rank with cuda_sync events, and a rank 1 alone.
const std::vector<std::string> kDirs = {"trace_filter", "nccl_parser_config", "amd_trace",
                                        "critical_path/alexnet", "trace_compare/base"};

TEST(AnalyzeCounterReports, QueueLengthAndMemoryBandwidthMatchHtaOnRealTraces) {
  std::size_t queue_rows = 0, bw_rows = 0;
  for (const std::string& d : kDirs) {
    const std::string dir = kPeers + "/kineto-traces/" + d;
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir, "queue", why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json got = ours(dir, "queue");
    expect_describe_rows_match(want["queue_length"], got["queue_length"], d + " queue_length");
    expect_describe_rows_match(want["memory_bw"], got["memory_bw"], d + " memory_bw");
    // No queue on these traces comes near CUDA's 1024 launches.
    EXPECT_EQ(want["queue_full"].size(), 0u) << d;
    EXPECT_EQ(got["queue_full"].size(), 0u) << d;
    queue_rows += want["queue_length"].size();
    bw_rows += want["memory_bw"].size();
  }
  // Every directory has streams and all but the ROCm one copies.
  EXPECT_GE(queue_rows, kDirs.size());
  EXPECT_GE(bw_rows, kDirs.size() - 1);
}

// A rank whose two streams each get 1200 launches 1 us apart while their kernels run 10 us
// each, so both queues pass 1024. Identical streams: the time blocked is the same on both.
fs::path write_full_queue_trace() {
  nlohmann::json events = nlohmann::json::array();
  int correlation = 1;
  for (const int stream : {7, 9}) {
    for (int i = 0; i < 1200; ++i) {
      events.push_back({{"ph", "X"},
                        {"cat", "cuda_runtime"},
                        {"name", "cudaLaunchKernel"},
                        {"pid", 100},
                        {"tid", stream == 7 ? 1 : 2},
                        {"ts", 1000 + i},
                        {"dur", 0.5},
                        {"args", {{"correlation", correlation}}}});
      events.push_back({{"ph", "X"},
                        {"cat", "kernel"},
                        {"name", "gemm"},
                        {"pid", 0},
                        {"tid", stream},
                        {"ts", 2000 + 10 * i},
                        {"dur", 10},
                        {"args", {{"stream", stream}, {"correlation", correlation}}}});
      ++correlation;
    }
  }
  const fs::path dir = scratch("full_queue");
  fs::create_directories(dir);
  std::ofstream(dir / "rank-0.json") << nlohmann::json{{"traceEvents", events}}.dump();
  return dir;
}

// HTA keeps the blocked time of one stream per rank (its result is a dict keyed by rank, so
// the last stream overwrites the others); opscope reports every stream, and the one HTA kept
// agrees with it.
TEST(AnalyzeCounterReports, TimeBlockedOnFullQueueOfEveryStream) {
  const fs::path dir = write_full_queue_trace();
  const nlohmann::json got = ours(dir.string(), "queue");
  ASSERT_EQ(got["queue_full"].size(), 2u) << got["queue_full"];
  const nlohmann::json& s7 = got["queue_full"][0];
  const nlohmann::json& s9 = got["queue_full"][1];
  EXPECT_EQ(s7["stream"], 7);
  EXPECT_EQ(s9["stream"], 9);
  EXPECT_GT(s7["duration_at_max_queue_length"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(s7["duration_at_max_queue_length"].get<double>(),
                   s9["duration_at_max_queue_length"].get<double>());
  // The relative time is over the rank's span, first start to last start: 1000 to 13990 us.
  EXPECT_NEAR(s7["relative_duration_at_max_queue_length"].get<double>(),
              s7["duration_at_max_queue_length"].get<double>() / (13990.0 - 1000.0), 1e-12);
  // The longest queue: 1200 launched by 2199.5 us, when the kernels that started by then
  // (at 2000, 2010, ..., 2190) are 20.
  const auto row7 = std::find_if(got["queue_length"].begin(), got["queue_length"].end(),
                                 [](const nlohmann::json& r) { return r["stream"] == 7; });
  ASSERT_NE(row7, got["queue_length"].end());
  EXPECT_EQ((*row7)["max"], 1180);

  std::string why;
  const nlohmann::json want = hta(dir.string(), "queue", why);
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(want["queue_full"].size(), 1u) << want["queue_full"];
  EXPECT_EQ(want["queue_full"][0]["stream"], 9);
  for (const char* column :
       {"duration_at_max_queue_length", "relative_duration_at_max_queue_length"}) {
    EXPECT_NEAR(s9[column].get<double>(), want["queue_full"][0][column].get<double>(),
                1e-9 * std::abs(want["queue_full"][0][column].get<double>()))
        << column;
  }
  tests::expect_rows_match(want["queue_length"], got["queue_length"], "full queue");
}

// The time series behind the summaries, through the public API: HTA's columns (and the rank),
// a point per launch and per start, times from the earliest event of the job.
TEST(AnalyzeCounterReports, TimeSeriesAreTheSummariesPoints) {
  const fs::path dir = write_full_queue_trace();
  const std::vector<std::shared_ptr<const ProfilerResult>> ranks = {
      read_trace((dir / "rank-0.json").string())};
  const Report q = queue_length_time_series(ranks);
  EXPECT_EQ(q.columns,
            (std::vector<std::string>{"rank", "ts", "pid", "tid", "stream", "queue_length"}));
  ASSERT_EQ(q.rows.size(), 2u * 2u * 1200u);
  // Stream 7 first, its first point the first launch at the origin, on the GPU's pid and tid.
  EXPECT_EQ(std::get<double>(q.rows[0][1]), 0.0);
  EXPECT_EQ(std::get<std::int64_t>(q.rows[0][2]), 0);
  EXPECT_EQ(std::get<std::int64_t>(q.rows[0][3]), 7);
  EXPECT_EQ(std::get<std::int64_t>(q.rows[0][4]), 7);
  EXPECT_EQ(std::get<std::int64_t>(q.rows[0][5]), 1);
  // The last point of each stream: its last kernel starts, the queue is empty.
  EXPECT_EQ(std::get<std::int64_t>(q.rows[2399][5]), 0);
  EXPECT_EQ(std::get<double>(q.rows[2399][1]), 1000.0 + 10 * 1199);
  const Report bw = memory_bw_time_series(ranks);
  EXPECT_EQ(bw.columns, (std::vector<std::string>{"rank", "ts", "pid", "name", "memory_bw_gbps"}));
  EXPECT_TRUE(bw.rows.empty());  // no copies
}

// HTA's generate_trace_with_counters run on a copy of the trace (it writes next to its input).
nlohmann::json hta_with_counters(const fs::path& dir, std::string& why) {
  const fs::path script = scratch("hta_with_counters.py");
  std::ofstream(script) << R"(import logging, sys
sys.path.insert(0, sys.argv[1])
try:
    import pandas, plotly
except ImportError as e:
    print(f"HTA needs {e.name}", file=sys.stderr)
    sys.exit(3)
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[2])
analysis.generate_trace_with_counters(ranks=sorted(analysis.t.traces.keys()))
)";
  const auto [code, text] =
      shell("/usr/bin/python3 " + script.string() + " " + kPeers + "/hta " + dir.string());
  if (code == 3) {
    why = text;
    return {};
  }
  EXPECT_EQ(code, 0) << text;
  return {};
}

nlohmann::json read_maybe_gzip(const fs::path& p) {
  static int n = 0;
  const fs::path plain = scratch("plain_" + std::to_string(n++) + ".json");
  const auto [code, text] = shell("gzip -dcf " + p.string() + " > " + plain.string());
  EXPECT_EQ(code, 0) << text;
  return read_json(plain);
}

bool is_gzip(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return magic[0] == 0x1f && magic[1] == 0x8b;
}

// The counter events of a trace written with counters: the events past the original ones.
std::vector<nlohmann::json> counters_after(const nlohmann::json& trace, std::size_t original) {
  std::vector<nlohmann::json> out(trace["traceEvents"].begin() + static_cast<long>(original),
                                  trace["traceEvents"].end());
  std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    const auto key = [](const nlohmann::json& e) {
      return std::make_tuple(e["name"].get<std::string>(), e.value("id", -1), e["ts"].get<double>(),
                             e["args"].begin().value().get<double>());
    };
    return key(a) < key(b);
  });
  return out;
}

TEST(AnalyzeCounterReports, AugmentedTraceMatchesHtaGenerateTraceWithCounters) {
  std::size_t compared = 0;
  std::size_t queue = 0, bw = 0;  // counter events compared
  // alexnet has copies; base has two profiler steps, so the last is left out with the work
  // it launched (2 counters are left).
  for (const std::string d : {"critical_path/alexnet", "trace_compare/base"}) {
    const fs::path src_dir = kPeers + "/kineto-traces/" + d;
    if (!fs::exists(src_dir)) GTEST_SKIP() << "no " << src_dir;
    const fs::path src = fs::directory_iterator(src_dir)->path();
    // A copy, for HTA writes its output next to its input.
    const fs::path dir = scratch("augment_" + src_dir.filename().string());
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(src, dir / src.filename());
    std::string why;
    hta_with_counters(dir, why);
    if (!why.empty()) GTEST_SKIP() << why;
    std::string stem = src.filename().string();
    stem.resize(stem.size() - std::string(".json.gz").size());
    const fs::path theirs = dir / (stem + "_with_counters.json.gz");
    ASSERT_TRUE(fs::exists(theirs)) << theirs;

    const fs::path mine = scratch("mine_" + stem + "_with_counters.json.gz");
    const auto [code, text] =
        shell(kCli + " analyze " + src.string() + " --augment " + mine.string());
    ASSERT_EQ(code, 0) << text;
    // --augment alone prints no report, only the line that says what it wrote (issue 38).
    EXPECT_TRUE(text.starts_with("opscope analyze: wrote " + mine.string() + ": ")) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    EXPECT_TRUE(is_gzip(mine));

    const nlohmann::json original = read_maybe_gzip(src);
    const nlohmann::json with_hta = read_maybe_gzip(theirs);
    const nlohmann::json with_ours = read_maybe_gzip(mine);
    const std::size_t n = original["traceEvents"].size();
    // Every original event, in its place, and every other top-level key as it was.
    ASSERT_GT(with_ours["traceEvents"].size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(with_ours["traceEvents"][i], original["traceEvents"][i]) << "event " << i;
    }
    for (const auto& [key, value] : original.items()) {
      if (key != "traceEvents") EXPECT_EQ(with_ours[key], value) << key;
    }
    EXPECT_EQ(with_ours.size(), original.size());

    const std::vector<nlohmann::json> want = counters_after(with_hta, n);
    const std::vector<nlohmann::json> got = counters_after(with_ours, n);
    ASSERT_EQ(got.size(), want.size()) << d;
    for (std::size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(d + " counter " + std::to_string(i) + ": HTA " + want[i].dump() + ", opscope " +
                   got[i].dump());
      EXPECT_EQ(got[i]["ph"], "C");
      EXPECT_EQ(got[i]["name"], want[i]["name"]);
      EXPECT_EQ(got[i]["pid"], want[i]["pid"]);
      EXPECT_EQ(got[i].contains("id"), want[i].contains("id"));
      if (want[i].contains("id")) EXPECT_EQ(got[i]["id"], want[i]["id"]);
      // Absolute times: HTA adds back the earliest event's time.
      EXPECT_NEAR(got[i]["ts"].get<double>(), want[i]["ts"].get<double>(), 1e-3);
      ASSERT_EQ(got[i]["args"].size(), 1u);
      const std::string counter = want[i]["args"].begin().key();
      ASSERT_TRUE(got[i]["args"].contains(counter));
      const double w = want[i]["args"][counter].get<double>();
      EXPECT_NEAR(got[i]["args"][counter].get<double>(), w, std::max(1e-9, 1e-9 * std::abs(w)));
      (counter == "Queue Length" ? queue : bw) += 1;
    }
    ++compared;

    // opscope reads the trace with counters back (leaving the counter events out) into the
    // same reports as the original.
    const auto [c1, report_original] =
        shell(kCli + " analyze " + src.string() + " --report queue,temporal --format json");
    const auto [c2, report_augmented] =
        shell(kCli + " analyze " + mine.string() + " --report queue,temporal --format json");
    EXPECT_EQ(c1, 0);
    EXPECT_EQ(c2, 0) << report_augmented;
    const std::size_t brace = report_augmented.find('{');
    ASSERT_NE(brace, std::string::npos) << report_augmented;
    EXPECT_EQ(nlohmann::json::parse(report_augmented.substr(brace)),
              nlohmann::json::parse(report_original.substr(report_original.find('{'))));
    EXPECT_EQ(read_trace(mine.string())->events().size(),
              read_trace(src.string())->events().size());
  }
  EXPECT_EQ(compared, 2u);
  EXPECT_GT(queue, 100u);
  EXPECT_GT(bw, 10u);
}

// Several traces: OUT is a directory with each one's <name>_with_counters.json.gz; a plain
// .json name gets a plain file.
TEST(AnalyzeCounterReports, AugmentEveryRankOfADirectory) {
  const std::string dir = kPeers + "/kineto-traces/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const fs::path out = scratch("augmented_ranks");
  fs::remove_all(out);
  auto [code, text] =
      shell(kCli + " analyze " + dir + " --report temporal --augment " + out.string());
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("temporal"), std::string::npos) << text;  // the report still prints
  for (const char* name :
       {"sampled_rank-0_with_counters.json.gz", "sampled_rank-1_with_counters.json.gz"}) {
    const fs::path p = out / name;
    ASSERT_TRUE(fs::exists(p)) << p;
    EXPECT_TRUE(is_gzip(p));
    const nlohmann::json t = read_maybe_gzip(p);
    const auto counters = std::count_if(
        t["traceEvents"].begin(), t["traceEvents"].end(), [](const nlohmann::json& e) {
          return e.value("ph", "") == "C" && e["name"] == "Queue Length";
        });
    EXPECT_GT(counters, 100) << name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 2);

  const fs::path plain = scratch("augmented_plain.json");
  std::tie(code, text) =
      shell(kCli + " analyze " + dir + "/sampled_rank-0.json.gz --augment " + plain.string());
  ASSERT_EQ(code, 0) << text;
  EXPECT_FALSE(is_gzip(plain));
  EXPECT_GT(read_json(plain)["traceEvents"].size(), 1000u);
}

TEST(AnalyzeCounterReports, UnwritableAugmentPathIsRefusedAndLeavesNothing) {
  const std::string dir = kPeers + "/kineto-traces/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const std::string one = dir + "/sampled_rank-0.json.gz";

  // A directory that does not exist.
  auto [code, text] = shell(kCli + " analyze " + one + " --augment /nonexistent/out.json.gz");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("cannot write trace with counters to '/nonexistent/out.json.gz'"),
            std::string::npos)
      << text;

  // A file where the directory should be: nothing is left beside it.
  const fs::path parent = scratch("augment_not_a_dir");
  fs::remove_all(parent);
  std::ofstream(parent) << "x";
  std::tie(code, text) =
      shell(kCli + " analyze " + one + " --augment " + (parent / "out.json").string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find((parent / "out.json").string()), std::string::npos) << text;
  EXPECT_TRUE(fs::is_regular_file(parent));

  // Several traces into a file: refused before anything is written, the file untouched.
  std::tie(code, text) = shell(kCli + " analyze " + dir + " --augment " + parent.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("it names the directory to write them to, but it is a file"),
            std::string::npos)
      << text;
  std::ifstream in(parent);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "x");

  // No temporary is left in the scratch directory either.
  for (const auto& entry : fs::directory_iterator(parent.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }

  std::tie(code, text) = shell(kCli + " analyze " + one + " --augment=");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("--augment expects a file or directory name"), std::string::npos) << text;
}

}  // namespace analyze_counter_reports_test
}  // namespace opscope

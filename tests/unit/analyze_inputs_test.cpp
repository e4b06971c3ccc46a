// `opscope analyze` as a person meets it (issue 38): the text ops table sorted and limited as
// torch's key_averages().table(), each rank's numbers from its own trace alone (checked against
// HTA), duplicate and stray inputs, --report all and traces without GPU activity.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace analyze_inputs_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::expect_rows_match;
using tests::hta;
using tests::kCli;
using tests::kPeers;
using tests::ours;
using tests::scratch;

const std::string kTraces = kPeers + "/kineto-traces";

// The text of rank `rank`'s ops table, from its heading to the next blank line.
std::string ops_section(const std::string& text, int rank) {
  const std::size_t at = text.find("ops, rank " + std::to_string(rank));
  if (at == std::string::npos) return "";
  return text.substr(at, text.find("\n\n", at) - at);
}

// The first table row under the header (the line after the second dashed line).
std::string first_row(const std::string& section) {
  std::size_t at = section.find("\n-");
  at = section.find("\n-", at + 2);
  at = section.find('\n', at + 2);
  return section.substr(at + 1, section.find('\n', at + 1) - at - 1);
}

// Finding 1: rank 0 of trace_filter has 397 rows; first-seen order showed 100 of them, none
// with GPU time and not the heaviest ones.
TEST(AnalyzeOpsTable, SortedBySelfCpuWithARowLimitAndALeftOutLine) {
  const std::string dir = kTraces + "/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const nlohmann::json all = ours(dir, "ops");
  std::vector<nlohmann::json> rank0;
  for (const auto& row : all["ops"])
    if (row["rank"] == 0) rank0.push_back(row);
  ASSERT_GT(rank0.size(), 100u) << "json keeps every row";
  const auto heaviest = *std::max_element(rank0.begin(), rank0.end(), [](auto& a, auto& b) {
    return a["Self CPU (us)"].template get<double>() < b["Self CPU (us)"].template get<double>();
  });
  EXPECT_EQ(heaviest["Name"], "## backward ##");

  auto [code, text] = shell(kCli + " analyze " + dir + " --report ops");
  ASSERT_EQ(code, 0) << text;
  const std::string section = ops_section(text, 0);
  EXPECT_NE(first_row(section).find("## backward ##"), std::string::npos) << section;
  EXPECT_NE(section.find("Self CUDA"), std::string::npos);
  // The left-out line counts the rows past the 100th by self CPU time, and those of them
  // with GPU time (all of it here: the sampled trace's kernels have no CPU time).
  std::vector<nlohmann::json> by_cpu = rank0;
  std::stable_sort(by_cpu.begin(), by_cpu.end(), [](auto& a, auto& b) {
    return a["Self CPU (us)"].template get<double>() > b["Self CPU (us)"].template get<double>();
  });
  const auto gpu_left_out = std::count_if(by_cpu.begin() + 100, by_cpu.end(), [](auto& r) {
    return r["Self CUDA (us)"].template get<double>() > 0 ||
           r["CUDA total (us)"].template get<double>() > 0;
  });
  EXPECT_GT(gpu_left_out, 0);
  const std::string left_out = std::to_string(rank0.size() - 100) + " of " +
                               std::to_string(rank0.size()) + " rows left out, " +
                               std::to_string(gpu_left_out) +
                               " of them with GPU time (--sort-by self_cuda_time_total shows "
                               "those first) (--row-limit 100; --row-limit 0 shows all)";
  EXPECT_NE(section.find(left_out), std::string::npos)
      << left_out << "\nnot in\n"
      << section.substr(section.size() > 400 ? section.size() - 400 : 0);
  // 100 rows shown: the row lines between the header's dashes and the closing ones.
  std::size_t rows = 0;
  {
    const std::size_t begin = section.find('\n', section.find("\n-", section.find("\n-") + 2) + 2);
    const std::size_t end = section.find("\n-", begin);
    for (std::size_t at = begin; at < end; at = section.find('\n', at + 1)) ++rows;
  }
  EXPECT_EQ(rows, 100u);

  // By self CUDA time: the first row is the GPU work with the most time, not 0.000us.
  const auto gpu_heaviest = *std::max_element(rank0.begin(), rank0.end(), [](auto& a, auto& b) {
    return a["Self CUDA (us)"].template get<double>() < b["Self CUDA (us)"].template get<double>();
  });
  ASSERT_GT(gpu_heaviest["Self CUDA (us)"].get<double>(), 0);
  std::tie(code, text) = shell(kCli + " analyze " + dir +
                               " --report ops --sort-by self_cuda_time_total --row-limit 5");
  ASSERT_EQ(code, 0) << text;
  const std::string by_cuda = ops_section(text, 0);
  const std::string name = gpu_heaviest["Name"].get<std::string>();
  EXPECT_NE(first_row(by_cuda).find(name.substr(0, 40)), std::string::npos) << by_cuda;
  EXPECT_NE(by_cuda.find(std::to_string(rank0.size() - 5) + " of "), std::string::npos);

  // 0 and -1 show every row, and then say nothing is left out.
  for (const char* all_rows : {"0", "-1"}) {
    std::tie(code, text) =
        shell(kCli + " analyze " + dir + " --report ops --row-limit " + all_rows);
    ASSERT_EQ(code, 0) << text;
    EXPECT_EQ(text.find("left out"), std::string::npos) << all_rows;
  }
}

TEST(AnalyzeOpsTable, UnknownSortKeyOrRowLimitIsAUsageError) {
  auto [code, text] = shell(kCli + " analyze x.json --sort-by self_gpu_time");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("'self_gpu_time'"), std::string::npos) << text;
  EXPECT_NE(text.find("self_cuda_time_total"), std::string::npos) << text;
  EXPECT_NE(text.find("cpu_time_total"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --row-limit 2.5");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("'2.5'"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze x.json --row-limit -2");
  EXPECT_EQ(code, 2) << text;
}

// Finding 2: alexnet has no ProfilerStep, the AMD trace two. Decided over both files, the cut
// left alexnet nothing (all zeros); each trace decides alone now.
TEST(AnalyzePerRank, ARanksNumbersDoNotDependOnTheOtherTraces) {
  const std::string alexnet = kTraces + "/critical_path/alexnet";
  const std::string amd = kTraces + "/amd_trace";
  if (!fs::exists(alexnet) || !fs::exists(amd)) GTEST_SKIP() << "no " << alexnet;
  for (const std::string report : {"temporal", "idle", "kernels"}) {
    SCOPED_TRACE(report);
    const nlohmann::json alone = ours(alexnet + "/*.gz", report);
    const nlohmann::json both = ours(alexnet + "/*.gz " + amd + "/*.gz", report);
    ASSERT_FALSE(alone[report].empty());
    for (const auto& row : alone[report]) {
      EXPECT_NE(std::find(both[report].begin(), both[report].end(), row), both[report].end())
          << row << "\nnot among\n"
          << both[report];
    }
  }
}

// A job whose rank 1 lost its ProfilerStep events: HTA, deciding over the job, keeps nothing of
// rank 1 (and its temporal breakdown raises IndexError). Each rank's row is HTA's for that
// rank's trace alone: rank 0 as in the whole job (two steps, the last left out), rank 1 whole.
TEST(AnalyzePerRank, ARankWithoutStepsIsAnalyzedWholeAsHtaDoesItAlone) {
  const std::string dir = kTraces + "/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const fs::path job = scratch("rank_without_steps");
  const fs::path alone = scratch("rank_without_steps_alone");
  fs::create_directories(job);
  fs::create_directories(alone);
  fs::copy_file(dir + "/sampled_rank-0.json.gz", job / "sampled_rank-0.json.gz",
                fs::copy_options::overwrite_existing);
  auto [code, text] =
      shell("zcat " + dir + "/sampled_rank-1.json.gz | sed 's/ProfilerStep#/Step#/g' | gzip > " +
            (job / "sampled_rank-1.json.gz").string());
  ASSERT_EQ(code, 0) << text;
  fs::copy_file(job / "sampled_rank-1.json.gz", alone / "sampled_rank-1.json.gz",
                fs::copy_options::overwrite_existing);
  for (const std::string report : {"temporal", "idle", "overlap"}) {
    SCOPED_TRACE(report);
    std::string why;
    const nlohmann::json hta_job = hta(dir, report, why);
    if (!why.empty()) GTEST_SKIP() << why;
    const nlohmann::json hta_alone = hta(alone.string(), report, why);
    if (!why.empty()) GTEST_SKIP() << why;
    nlohmann::json want = nlohmann::json::array();
    for (const auto& row : hta_job[report])
      if (row["rank"] == 0) want.push_back(row);
    for (const auto& row : hta_alone[report]) want.push_back(row);
    expect_rows_match(want, ours(job.string(), report)[report], report);
  }
  // The cut is said once, naming the rank it applies to.
  std::tie(code, text) = shell(kCli + " analyze " + job.string() + " --report temporal,idle");
  ASSERT_EQ(code, 0) << text;
  const std::string note = "the last ProfilerStep#N of each trace holding two or more is left out";
  ASSERT_NE(text.find(note), std::string::npos) << text;
  EXPECT_EQ(text.find(note, text.find(note) + 1), std::string::npos) << text;
  EXPECT_NE(text.find("(rank 0);"), std::string::npos) << text;
  std::tie(code, text) =
      shell(kCli + " analyze " + job.string() + " --report temporal --include-last-step");
  EXPECT_EQ(text.find(note), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze " + alone.string() + " --report temporal");
  EXPECT_EQ(text.find(note), std::string::npos) << text;
}

// Finding 5: the same trace given twice (one path, a link, a copy) or two traces claiming one
// rank are said on stderr by analyze, naming the files; merge refuses them unless told.
TEST(AnalyzeInputs, RepeatedTracesAreWarnedOfAndMergeRefusesThem) {
  const std::string dir = kTraces + "/trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const std::string r0 = dir + "/sampled_rank-0.json.gz";
  const std::string r1 = dir + "/sampled_rank-1.json.gz";
  const fs::path copies = scratch("repeated");
  fs::create_directories(copies);
  const fs::path copy = copies / "copy_of_rank-0.json.gz";
  fs::copy_file(r0, copy, fs::copy_options::overwrite_existing);
  const fs::path link = copies / "link_to_rank-0.json.gz";
  fs::remove(link);
  fs::create_symlink(r0, link);
  // Rank 1's events, claiming rank 0.
  const fs::path claims0 = copies / "claims_rank-0.json.gz";
  auto [code, text] =
      shell("zcat " + r1 + " | sed 's/\"rank\": 1,/\"rank\": 0,/' | gzip > " + claims0.string());
  ASSERT_EQ(code, 0) << text;

  const std::vector<std::pair<std::string, std::string>> cases = {
      {r0 + " " + r0, r0 + " and " + r0 + " are the same file"},
      {r0 + " " + link.string(), r0 + " and " + link.string() + " are the same file"},
      {r0 + " " + copy.string(), r0 + " and " + copy.string() + " hold the same bytes"},
      {r0 + " " + claims0.string(),
       r0 + " and " + claims0.string() + " both claim rank 0 (distributedInfo.rank)"}};
  for (const auto& [inputs, said] : cases) {
    SCOPED_TRACE(inputs);
    std::tie(code, text) = shell(kCli + " analyze " + inputs + " --report temporal");
    EXPECT_EQ(code, 0) << text;
    EXPECT_NE(text.find("opscope analyze: warning: " + said), std::string::npos) << text;

    const fs::path merged = scratch("repeated_merged.json");
    fs::remove(merged);
    std::tie(code, text) = shell(kCli + " merge " + inputs + " -o " + merged.string());
    EXPECT_EQ(code, 1) << text;
    EXPECT_NE(text.find(said), std::string::npos) << text;
    EXPECT_NE(text.find("--allow-duplicate-ranks"), std::string::npos) << text;
    EXPECT_FALSE(fs::exists(merged));
    std::tie(code, text) =
        shell(kCli + " merge " + inputs + " -o " + merged.string() + " --allow-duplicate-ranks");
    EXPECT_EQ(code, 0) << text;
    EXPECT_NE(text.find("merged 2 ranks"), std::string::npos) << text;
  }
  // A directory given twice: each of its files said once.
  std::tie(code, text) = shell(kCli + " analyze " + dir + " " + dir + " --report temporal");
  EXPECT_EQ(code, 0) << text;
  for (const std::string& f : {r0, r1}) {
    const std::string said = "warning: " + f + " and " + f + " are the same file";
    EXPECT_NE(text.find(said), std::string::npos) << text;
    EXPECT_EQ(text.find(said, text.find(said) + 1), std::string::npos) << text;
  }
  // The two ranks of one job: nothing to say, nothing refused.
  std::tie(code, text) = shell(kCli + " analyze " + dir + " --report temporal");
  EXPECT_EQ(text.find("warning"), std::string::npos) << text;
  const fs::path merged = scratch("job_merged.json");
  std::tie(code, text) = shell(kCli + " merge " + dir + " -o " + merged.string());
  EXPECT_EQ(code, 0) << text;
}

// Finding 6: the Chakra execution trace PyTorch users keep beside the Kineto trace is skipped
// with a line saying what it is, and the Kineto trace analyzed; named alone it is refused.
TEST(AnalyzeInputs, ADirectorysFilesThatAreNotTracesAreSkippedWithALine) {
  const std::string dir = kTraces + "/execution_trace";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const std::string et = dir + "/benchmark_simple_add_et.json.gz";
  auto [code, text] = shell(kCli + " analyze " + dir + " --report temporal");
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("opscope analyze: skipped " + et +
                      ": a PyTorch execution trace (Chakra), not a Chrome trace\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("temporal\nrank"), std::string::npos) << text;
  const fs::path merged = scratch("et_merged.json");
  std::tie(code, text) = shell(kCli + " merge " + dir + " -o " + merged.string());
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("opscope merge: skipped " + et), std::string::npos) << text;
  EXPECT_NE(text.find("merged 1 rank "), std::string::npos) << text;

  std::tie(code, text) = shell(kCli + " analyze " + et);
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("this is an execution trace (Chakra"), std::string::npos) << text;
  // A directory of such files alone has no trace, and says what it skipped.
  const fs::path only = scratch("only_et");
  fs::create_directories(only);
  fs::copy_file(et, only / "et.json.gz", fs::copy_options::overwrite_existing);
  std::tie(code, text) = shell(kCli + " analyze " + only.string());
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("no .json or .json.gz trace in directory"), std::string::npos) << text;
  EXPECT_NE(text.find("et.json.gz: a PyTorch execution trace (Chakra)"), std::string::npos) << text;
}

// Finding 8: --report all, and a CPU-only trace said to have no GPU activity, once per rank.
TEST(AnalyzeInputs, ReportAllAndNoGpuActivity) {
  const std::string dir = kTraces + "/cpu_only";
  const std::string job = kTraces + "/trace_filter";
  if (!fs::exists(dir) || !fs::exists(job)) GTEST_SKIP() << "no " << dir;
  const nlohmann::json all = ours(job, "all");
  for (const char* table : {"temporal", "idle", "overlap", "kernel_type", "kernels", "ops",
                            "queue_length", "critical_path", "events"}) {
    EXPECT_TRUE(all.contains(table)) << table << " not in " << all.size() << " tables";
  }
  const std::string note = "no GPU activity in this trace";
  for (const std::string report : {"temporal", "all"}) {
    auto [code, text] = shell(kCli + " analyze " + dir + " --report " + report);
    EXPECT_EQ(code, 0) << text.substr(0, 2000);
    const std::size_t at = text.find("opscope analyze: rank 34 (");
    ASSERT_NE(at, std::string::npos) << text.substr(0, 2000);
    EXPECT_NE(text.find(note, at), std::string::npos);
    EXPECT_EQ(text.find(note, text.find(note) + 1), std::string::npos) << "said once";
  }
  auto [code, text] = shell(kCli + " analyze " + job + " --report temporal");
  EXPECT_EQ(text.find(note), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " analyze " + dir + " --report ops");
  EXPECT_EQ(text.find(note), std::string::npos) << "ops reads no GPU work";
}

}  // namespace analyze_inputs_test
}  // namespace opscope

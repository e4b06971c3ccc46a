// `opscope merge`: the ranks of a job in one Chrome trace. The merged file is read back with
// nlohmann's parser and every input event is found in it, under its rank's processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/cli_test_support.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace merge_cli_test {

namespace fs = std::filesystem;
using cli::tests::shell;
using tests::kCli;
using tests::kPeers;
using tests::scratch;

const std::string kTraces = kPeers + "/kineto-traces/";

// A .json or .json.gz file parsed (zlib reads both).
nlohmann::json read_any(const std::string& path) {
  return nlohmann::json::parse(testing::read_gzip_file(path));
}

bool is_process_meta(const nlohmann::json& e) {
  return e.value("ph", "") == "M" &&
         (e.value("name", "") == "process_name" || e.value("name", "") == "process_sort_index");
}

// An event without what the merge rewrites (pid, ids, the args of process names and sort
// indices), as text: equal for an input event and its merged copy.
std::string canonical(nlohmann::json e) {
  e.erase("pid");
  e.erase("id");
  e.erase("bind_id");
  if (is_process_meta(e)) e.erase("args");
  return e.dump();
}

// Merges `inputs` and checks that nothing of any rank was lost or mixed with another's.
void expect_lossless_merge(const std::vector<std::string>& inputs, std::size_t rank_count,
                           const std::string& out) {
  std::string files;
  for (const std::string& in : inputs) files += " " + in;
  const auto [code, text] = shell(kCli + " merge" + files + " -o " + out);
  ASSERT_EQ(code, 0) << text;
  const nlohmann::json merged = read_any(out);
  const nlohmann::json& ranks = merged["opscopeMerged"];
  ASSERT_EQ(ranks.size(), rank_count);

  // Each new pid belongs to one rank; ranks come in rank order.
  std::map<std::int64_t, std::size_t> rank_of_pid;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (k > 0) EXPECT_LE(ranks[k - 1]["rank"], ranks[k]["rank"]);
    for (const auto& [old_pid, new_pid] : ranks[k]["pids"].items()) {
      EXPECT_TRUE(rank_of_pid.emplace(new_pid.get<std::int64_t>(), k).second) << new_pid;
    }
  }
  // The merged events by rank, canonical text -> count; and the flow ids each rank uses.
  std::vector<std::multiset<std::string>> got(ranks.size());
  std::map<std::int64_t, std::size_t> rank_of_id;
  std::map<std::int64_t, std::int64_t> sort_of_pid;
  for (const nlohmann::json& e : merged["traceEvents"]) {
    ASSERT_TRUE(e.contains("pid")) << e;
    const auto it = rank_of_pid.find(e["pid"].get<std::int64_t>());
    ASSERT_NE(it, rank_of_pid.end()) << e;
    const std::size_t k = it->second;
    got[k].insert(canonical(e));
    if (e.contains("id")) {
      const auto [at, added] = rank_of_id.emplace(e["id"].get<std::int64_t>(), k);
      EXPECT_EQ(at->second, k) << "an id shared by two ranks: " << e;
    }
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      EXPECT_EQ(
          e["args"]["name"].get<std::string>().rfind("rank " + ranks[k]["rank"].dump() + ": ", 0),
          0u)
          << e;
    }
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_sort_index") {
      sort_of_pid[e["pid"].get<std::int64_t>()] = e["args"]["sort_index"].get<std::int64_t>();
    }
  }
  // Every process sorts after every process of a lower rank.
  ASSERT_EQ(sort_of_pid.size(), rank_of_pid.size()) << "every process has a sort index";
  for (const auto& [pid_a, sort_a] : sort_of_pid) {
    for (const auto& [pid_b, sort_b] : sort_of_pid) {
      if (rank_of_pid[pid_a] < rank_of_pid[pid_b]) EXPECT_LT(sort_a, sort_b);
    }
  }
  // Every input event is in its rank, as many times; what else is there are the names and
  // sort indices added for processes that had none.
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const nlohmann::json input = read_any(ranks[k]["file"].get<std::string>());
    std::multiset<std::string> want;
    for (const nlohmann::json& e : input["traceEvents"]) want.insert(canonical(e));
    ASSERT_GE(got[k].size(), want.size());
    for (const std::string& e : want) {
      const auto it = got[k].find(e);
      ASSERT_NE(it, got[k].end()) << "lost from rank " << ranks[k]["rank"] << ": " << e;
      got[k].erase(it);
    }
    for (const std::string& extra : got[k]) {
      EXPECT_TRUE(is_process_meta(nlohmann::json::parse(extra))) << extra;
    }
    // Its other top-level keys are kept.
    for (const auto& [key, value] : input.items()) {
      if (key != "traceEvents") EXPECT_EQ(ranks[k]["metadata"][key], value) << key;
    }
  }
}

// Flows keep their pairs: within a rank, the ends that shared an id still share one.
void expect_flows_paired(const std::string& input, const std::string& merged_path,
                         std::int64_t rank) {
  const nlohmann::json in = read_any(input);
  const nlohmann::json merged = read_any(merged_path);
  std::set<std::int64_t> pids;
  for (const auto& r : merged["opscopeMerged"]) {
    if (r["file"] == input) {
      for (const auto& [k, v] : r["pids"].items()) pids.insert(v.get<std::int64_t>());
    }
  }
  ASSERT_FALSE(pids.empty()) << "rank " << rank;
  const auto pairs = [](const nlohmann::json& events, const std::set<std::int64_t>* only) {
    std::map<std::string, std::multiset<std::string>> by_id;  // id -> the ends' ts/ph
    for (const auto& e : events) {
      const std::string ph = e.value("ph", "");
      if (ph != "s" && ph != "f" && ph != "t") continue;
      if (only != nullptr && only->count(e["pid"].get<std::int64_t>()) == 0) continue;
      by_id[e["cat"].dump() + e["id"].dump()].insert(ph + e["ts"].dump());
    }
    std::multiset<std::multiset<std::string>> groups;
    for (auto& [id, ends] : by_id) groups.insert(ends);
    return groups;
  };
  const auto want = pairs(in["traceEvents"], nullptr);
  EXPECT_GT(want.size(), 10u);
  EXPECT_EQ(pairs(merged["traceEvents"], &pids), want);
}

TEST(MergeCli, TwoRanksOfOneJobLoseNothing) {
  const std::string dir = kTraces + "trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  const fs::path out = scratch("merged_trace_filter.json");
  expect_lossless_merge({dir}, 2, out.string());
  const nlohmann::json merged = read_any(out.string());
  EXPECT_EQ(merged["opscopeMerged"][0]["rank"], 0);
  EXPECT_EQ(merged["opscopeMerged"][1]["rank"], 1);
  EXPECT_EQ(merged["schemaVersion"], 1);  // both ranks say so
  EXPECT_FALSE(merged.contains("distributedInfo")) << "one per rank, under opscopeMerged";
}

// Ranks of other jobs: NCCL flows ("ac2g", "fwdbwd"), float timestamps, a ROCm trace without
// a rank (its position), a CPU-only rank 34, given as files; written gzip.
TEST(MergeCli, FlowsCountersAndRanklessTracesAsGzip) {
  const std::string nccl = kTraces + "nccl_parser_config/nccl_data.json.gz";
  const std::string amd = kTraces + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz";
  const std::string cpu = kTraces + "cpu_only";
  if (!fs::exists(nccl) || !fs::exists(amd) || !fs::exists(cpu)) GTEST_SKIP() << "no traces";
  const fs::path out = scratch("merged_three.json.gz");
  expect_lossless_merge({cpu, amd, nccl}, 3, out.string());
  const nlohmann::json merged = read_any(out.string());
  std::vector<std::int64_t> ranks;
  for (const auto& r : merged["opscopeMerged"]) ranks.push_back(r["rank"]);
  // nccl_data says rank 0; the AMD trace has none and is second: 1; cpu_only is 34.
  EXPECT_EQ(ranks, (std::vector<std::int64_t>{0, 1, 34}));
  expect_flows_paired(nccl, out.string(), 0);
  expect_flows_paired(amd, out.string(), 1);
  // The merged trace is a trace opscope reads too.
  const auto [code, text] = shell(kCli + " analyze " + out.string() + " --format json");
  EXPECT_EQ(code, 0) << text;
}

TEST(MergeCli, ErrorsSayWhatIsWrongAndLeaveNothing) {
  const std::string dir = kTraces + "trace_filter";
  if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir;
  auto [code, text] = shell(kCli + " merge " + dir);
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("no output given: -o MERGED.json"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " merge -o x.json");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("no traces given"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " merge " + dir + " --gzip -o x.json");
  EXPECT_EQ(code, 2);
  EXPECT_NE(text.find("unknown flag --gzip"), std::string::npos) << text;
  std::tie(code, text) = shell(kCli + " merge /nonexistent -o x.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("no such trace file or directory: /nonexistent"), std::string::npos) << text;
  const fs::path empty = scratch("merge_empty_dir");
  fs::create_directories(empty);
  std::tie(code, text) = shell(kCli + " merge " + empty.string() + " -o x.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("no .json or .json.gz trace in directory"), std::string::npos) << text;

  // A malformed second input: the byte, and no output file (the first input was written).
  const fs::path bad = scratch("merge_bad.json");
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X", "ts": 1,}]})";
  const fs::path out = scratch("merge_never.json");
  fs::remove(out);
  std::tie(code, text) = shell(kCli + " merge " + dir + "/sampled_rank-0.json.gz " + bad.string() +
                               " -o " + out.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("merge_bad.json"), std::string::npos) << text;
  EXPECT_NE(text.find("at byte 37"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& entry : fs::directory_iterator(out.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find("merge_never.json.tmp"), std::string::npos)
        << "a temporary was left: " << entry.path();
  }
  std::ofstream(bad) << R"([{"ph": "X"}])";
  std::tie(code, text) = shell(kCli + " merge " + bad.string() + " -o " + out.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("expected a JSON object at byte 0"), std::string::npos) << text;

  std::tie(code, text) = shell(kCli + " merge " + dir + " -o /nonexistent/dir/m.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(text.find("cannot write merged trace to '/nonexistent/dir/m.json'"), std::string::npos)
      << text;

  std::tie(code, text) = shell(kCli + " merge --help");
  EXPECT_EQ(code, 0);
  EXPECT_NE(text.find("usage: opscope merge DIR|FILE... -o MERGED.json"), std::string::npos)
      << text;
}

}  // namespace merge_cli_test
}  // namespace opscope

// The traces of the GPU run (tests/data/gpu, README there): opscope's CUPTI backend on an H200
// (tests/gpu/launch_check.cu) and PyTorch 2.11's profiler over the same work
// (tests/gpu/torch_side.py). Each has Kineto's layout where the analysis and Perfetto read it
// (kernels on their streams with correlation, External id and an ac2g flow from their launch,
// syncs on the device's thread, deviceProperties), and `opscope analyze` reads each as Holistic
// Trace Analysis does (temporal, kernel and idle breakdowns, launch statistics).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace gpu_trace_test {

using nlohmann::json;
using tests::hta;
using tests::ours;

const std::string kData = std::string(OPSCOPE_SOURCE_DIR) + "/tests/data/gpu";

struct GpuTrace {
  std::string dir;
  std::string file;
  int kernels;               // the work's kernels
  std::int64_t sync_thread;  // the tid of the device's syncs: opscope -1, Kineto now abs(-1)
};

const GpuTrace kOurs{kData + "/opscope-h200", "launch_check.json.gz", 16, -1};
const GpuTrace kTorch{kData + "/torch-2.11-h200", "torch_side.json.gz", 17, 1};

json load(const GpuTrace& t) { return json::parse(testing::read_gzip_file(t.dir + "/" + t.file)); }

void expect_kineto_layout(const GpuTrace& t) {
  SCOPED_TRACE(t.file);
  const json trace = load(t);
  ASSERT_TRUE(trace.contains("deviceProperties"));
  EXPECT_EQ(trace["deviceProperties"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(trace["deviceProperties"][0]["numSms"], 132);
  std::map<std::int64_t, std::set<std::string>> flow_phases;  // ac2g id -> "s", "f"
  std::map<std::int64_t, std::string> launch_of;              // correlation -> call name
  std::set<std::int64_t> cpu_ids;                             // External ids of CPU ranges
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> thread_names;
  for (const json& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "ac2g") flow_phases[e["id"].get<std::int64_t>()].insert(e["ph"].get<std::string>());
    if (cat == "cuda_runtime" &&
        e["name"].get<std::string>().find("LaunchKernel") != std::string::npos) {
      launch_of[e["args"]["correlation"].get<std::int64_t>()] = e["name"];
    }
    if ((cat == "user_annotation" || cat == "cpu_op") && e.contains("args") &&
        e["args"].contains("External id")) {
      cpu_ids.insert(e["args"]["External id"].get<std::int64_t>());
    }
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      thread_names[{e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>()}] =
          e["args"]["name"];
    }
  }
  int kernels = 0, syncs = 0;
  std::set<std::int64_t> streams;
  for (const json& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "kernel") {
      ++kernels;
      const json& a = e["args"];
      const std::int64_t correlation = a["correlation"];
      streams.insert(a["stream"].get<std::int64_t>());
      EXPECT_EQ(e["tid"], a["stream"]) << "a kernel off its stream's thread";
      EXPECT_TRUE(launch_of.contains(correlation)) << "kernel without its launch: " << e;
      EXPECT_EQ(flow_phases[correlation], (std::set<std::string>{"s", "f"}))
          << "kernel without an ac2g flow from its launch: " << e;
      EXPECT_TRUE(cpu_ids.contains(a["External id"].get<std::int64_t>()))
          << "kernel whose External id names no CPU range: " << e;
      EXPECT_TRUE(a.contains("blocks per SM") && a.contains("warps per SM")) << e;
    }
    if (cat == "cuda_sync" && e["name"] == "Context Sync") {
      ++syncs;
      EXPECT_EQ(e["tid"].get<std::int64_t>(), t.sync_thread) << e;
      const std::pair<std::int64_t, std::int64_t> thread{e["pid"].get<std::int64_t>(),
                                                         t.sync_thread};
      EXPECT_EQ(thread_names[thread], "Device 0");
    }
  }
  EXPECT_EQ(kernels, t.kernels);
  EXPECT_EQ(streams.size(), 2u);
  EXPECT_GE(syncs, 1);
}

TEST(GpuTraces, OpscopesAndTorchsHaveKinetosLayout) {
  expect_kineto_layout(kOurs);
  expect_kineto_layout(kTorch);
}

TEST(GpuTraces, AnalyzeReadsBothAsHtaDoes) {
  for (const GpuTrace& t : {kOurs, kTorch}) {
    for (const std::string& report : {"temporal", "kernels", "idle", "launch"}) {
      SCOPED_TRACE(t.file + " " + report);
      std::string why;
      const json want = hta(t.dir, report, why);
      if (!why.empty()) GTEST_SKIP() << why;
      const json got = ours(t.dir, report);
      ASSERT_FALSE(want.empty());
      for (const auto& [table, rows] : want.items()) {
        ASSERT_TRUE(got.contains(table)) << table;
        tests::expect_rows_match(rows, got[table], t.file + " " + table);
      }
    }
  }
}

}  // namespace gpu_trace_test
}  // namespace opscope

// Every spelling CUDA 13 gives a launch is a launch to the analysis (src/analysis/hta_events.h):
// nvcc 13 compiles <<<>>> to __cudaLaunchKernel, a per-thread-default-stream build calls the
// "_ptsz" entry points, and CUPTI's callback names carry "_vNNNN". A real Kineto trace
// (../shared/peers/kineto-traces/critical_path/simple_add) with its calls renamed so must give
// the reports that count launches the numbers the trace gives as PyTorch wrote it. The same
// trace has context syncs on Kineto's thread -1, which no report may take for a stream.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "analysis/hta_events.h"
#include "opscope/export.h"
#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/hta_oracle.h"
#include "support/test_support.h"

namespace opscope {
namespace launch_names_test {

using nlohmann::json;

// A JSON id written as -1, not as the unsigned 18446744073709551615 (which nlohmann::json
// compares equal to -1).
bool is_minus_one(const json& v) {
  return v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() == -1;
}

const std::string kTrace =
    tests::kPeers +
    "/kineto-traces/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz";

// The trace with its runtime calls renamed by `renames` (old name -> new), read back.
std::shared_ptr<const ProfilerResult> renamed(const std::map<std::string, std::string>& renames,
                                              const testing::TempDir& dir,
                                              const std::string& name) {
  json trace = json::parse(testing::read_gzip_file(kTrace));
  for (json& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "cuda_runtime") continue;
    const auto it = renames.find(e.value("name", ""));
    if (it != renames.end()) e["name"] = it->second;
  }
  const std::string path = dir.file(name + ".json");
  std::ofstream(path) << trace.dump();
  return read_trace(path);
}

bool same_cell(const ReportCell& a, const ReportCell& b) {
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<double>(&a)) {
    const double y = std::get<double>(b);
    return (std::isnan(*x) && std::isnan(y)) || *x == y;
  }
  if (const auto* x = std::get_if<std::string>(&a)) {
    // A row may name its launch: the same call under another spelling.
    return internal::canonical_call_name(*x) ==
           internal::canonical_call_name(std::get<std::string>(b));
  }
  return a == b;
}

// The reports that recognize launches by name, over `r`.
std::vector<Report> launch_reports(const std::shared_ptr<const ProfilerResult>& r) {
  const std::vector<std::shared_ptr<const ProfilerResult>> ranks = {r};
  std::vector<Report> out;
  for (const char* name : {"launch", "queue", "counters", "aten-launch", "critical-path"}) {
    for (Report& t : run_report(name, ranks)) out.push_back(std::move(t));
  }
  return out;
}

TEST(LaunchNames, EverySpellingOfALaunchCountsAsTheLaunch) {
  EXPECT_EQ(internal::canonical_call_name("__cudaLaunchKernel"), "cudaLaunchKernel");
  EXPECT_EQ(internal::canonical_call_name("__cudaLaunchKernel_ptsz_v13000"), "cudaLaunchKernel");
  EXPECT_EQ(internal::canonical_call_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(internal::canonical_call_name("cudaMemcpy_ptds"), "cudaMemcpy");
  EXPECT_EQ(internal::canonical_call_name("cuLaunchKernelEx_ptsz"), "cuLaunchKernelEx");
  // Names that only look alike stay as they are.
  EXPECT_EQ(internal::canonical_call_name("__init__"), "__init__");
  EXPECT_EQ(internal::canonical_call_name("aten::add_v2"), "aten::add_v2");
  EXPECT_EQ(internal::canonical_call_name("cuMemcpyHtoD_v2"), "cuMemcpyHtoD_v2");
  EXPECT_EQ(internal::canonical_call_name("_ptsz"), "_ptsz");

  // Every kernel launch the CUDA 13 headers define (cupti_runtime_cbid.h, cupti_driver_cbid.h),
  // as CUPTI names them.
  for (const char* launch : {"cudaLaunchKernel_v7000",
                             "cudaLaunchKernel_ptsz_v7000",
                             "__cudaLaunchKernel_v13000",
                             "__cudaLaunchKernel_ptsz_v13000",
                             "cudaLaunchKernelExC_v11060",
                             "cudaLaunchKernelExC_ptsz_v11060",
                             "cudaLaunchCooperativeKernel_v9000",
                             "cudaLaunchCooperativeKernel_ptsz_v9000",
                             "cudaLaunchCooperativeKernelMultiDevice_v9000",
                             "cudaLaunch_v3020",
                             "cudaLaunch_ptsz_v7000",
                             "cuLaunchKernel",
                             "cuLaunchKernel_ptsz",
                             "cuLaunchKernelEx",
                             "cuLaunchKernelEx_ptsz",
                             "cuLaunchCooperativeKernel",
                             "cuLaunchCooperativeKernel_ptsz",
                             "cuLaunchCooperativeKernelMultiDevice",
                             "cuLaunch",
                             "cuLaunchGrid",
                             "cuLaunchGridAsync"}) {
    SCOPED_TRACE(launch);
    EXPECT_TRUE(internal::is_kernel_launch_call(launch));
    EXPECT_TRUE(internal::is_launch_call(launch, internal::LaunchCalls::kEnqueue));
  }
  // Graphs launch many kernels under one correlation, host functions none.
  for (const char* not_a_kernel :
       {"cudaGraphLaunch_v10000", "cudaGraphLaunch_ptsz_v10000", "cuGraphLaunch",
        "cudaLaunchHostFunc_v10000", "cudaLaunchHostFunc_ptsz_v10000", "cuLaunchHostFunc",
        "cudaMemcpyAsync_ptsz_v7000"}) {
    SCOPED_TRACE(not_a_kernel);
    EXPECT_FALSE(internal::is_kernel_launch_call(not_a_kernel));
  }
  // Copies and sets in their per-thread-stream spelling are enqueued as the others are.
  EXPECT_TRUE(
      internal::is_launch_call("cudaMemcpyAsync_ptsz_v7000", internal::LaunchCalls::kLaunchStats));
  EXPECT_TRUE(internal::is_launch_call("cudaMemsetAsync_ptsz", internal::LaunchCalls::kEnqueue));
  // HTA's grouping of names keeps nvcc 13's launch call out of the computations, as
  // cudaLaunchKernel.
  EXPECT_EQ(kernel_type("__cudaLaunchKernel"), kernel_type("cudaLaunchKernel"));
  EXPECT_EQ(kernel_type("__cudaLaunchKernel_ptsz"), kernel_type("cudaLaunchKernel"));
}

TEST(LaunchNames, ReportsCountEverySpellingAsPyTorchsLaunches) {
  if (!std::filesystem::exists(kTrace)) GTEST_SKIP() << "no " << kTrace << " (../shared/peers)";
  const testing::TempDir dir;
  const std::vector<Report> want = launch_reports(renamed({}, dir, "as_written"));
  std::size_t rows = 0;
  for (const Report& t : want) rows += t.rows.size();
  ASSERT_GT(rows, 0u);
  const std::vector<std::map<std::string, std::string>> spellings = {
      {{"cudaLaunchKernel", "__cudaLaunchKernel"}},
      {{"cudaLaunchKernel", "__cudaLaunchKernel_ptsz"}},
      {{"cudaLaunchKernel", "cudaLaunchKernel_v7000"}},
      {{"cudaLaunchKernel", "cudaLaunchKernel_ptsz"},
       {"cudaMemcpyAsync", "cudaMemcpyAsync_ptsz"},
       {"cudaStreamSynchronize", "cudaStreamSynchronize_ptsz"},
       {"cudaStreamWaitEvent", "cudaStreamWaitEvent_ptsz"},
       {"cudaEventRecord", "cudaEventRecord_ptsz"}},
  };
  for (const auto& renames : spellings) {
    const std::string as = renames.begin()->second;
    SCOPED_TRACE(as);
    const std::vector<Report> got = launch_reports(renamed(renames, dir, as));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t t = 0; t < want.size(); ++t) {
      SCOPED_TRACE(want[t].name);
      EXPECT_EQ(got[t].columns, want[t].columns);
      ASSERT_EQ(got[t].rows.size(), want[t].rows.size());
      for (std::size_t i = 0; i < want[t].rows.size(); ++i) {
        ASSERT_EQ(got[t].rows[i].size(), want[t].rows[i].size());
        for (std::size_t c = 0; c < want[t].rows[i].size(); ++c) {
          EXPECT_TRUE(same_cell(got[t].rows[i][c], want[t].rows[i][c]))
              << "row " << i << " column " << want[t].columns[c];
        }
      }
    }
  }
}

// Kineto puts context and event syncs on thread -1 of the device ("Device 0"): it reads back
// as a thread of no stream, writes out as -1 again, and no report counts it as a stream.
TEST(LaunchNames, ContextSyncsThreadMinusOneIsNoStream) {
  if (!std::filesystem::exists(kTrace)) GTEST_SKIP() << "no " << kTrace << " (../shared/peers)";
  const auto r = read_trace(kTrace);
  const std::uint64_t minus_one = static_cast<std::uint64_t>(std::int64_t{-1});
  std::int32_t device_thread = -1;
  for (std::size_t i = 0; i < r->threads().size(); ++i) {
    if (r->threads()[i].tid == minus_one) device_thread = static_cast<std::int32_t>(i);
  }
  ASSERT_GE(device_thread, 0);
  EXPECT_EQ(r->threads()[static_cast<std::size_t>(device_thread)].stream, -1);
  std::size_t context_syncs = 0;
  for (const Event& e : r->events()) {
    if (e.name != "Context Sync") continue;
    ++context_syncs;
    EXPECT_EQ(e.thread, device_thread);
  }
  EXPECT_GT(context_syncs, 0u);

  const json out = json::parse(chrome_trace_json(*r));
  std::size_t written = 0;
  for (const json& e : out["traceEvents"]) {
    if (e.value("name", "") == "Context Sync") {
      ++written;
      EXPECT_TRUE(is_minus_one(e["tid"])) << e["tid"];
    }
  }
  EXPECT_EQ(written, context_syncs);

  const std::vector<std::shared_ptr<const ProfilerResult>> ranks = {r};
  for (const char* name : {"idle", "temporal", "queue"}) {
    for (const Report& t : run_report(name, ranks)) {
      SCOPED_TRACE(t.name);
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        if (t.columns[c] != "stream") continue;
        for (const auto& row : t.rows) {
          if (const auto* s = std::get_if<std::int64_t>(&row[c])) {
            EXPECT_GE(*s, 0);
            EXPECT_NE(*s, 4294967295);
          }
        }
      }
    }
  }
}

}  // namespace launch_names_test
}  // namespace opscope

// The events HTA holds (src/analysis/hta_events.cpp): in_hta_frame, the one rule every report
// and trace_diff() keep events by, against HTA's own parser run on the shared traces
// (tests/peers/hta_report.py's "frame": its DataFrame before aligning or filtering), counted
// per rank and category.
#include "analysis/hta_events.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "opscope/export.h"
#include "opscope/trace_analysis.h"
#include "support/hta_oracle.h"

namespace opscope {
namespace hta_events_test {

namespace fs = std::filesystem;
using tests::hta;
using tests::kPeers;

// (rank, category) -> events in HTA's frame, from every trace of `dir` as opscope reads it.
std::map<std::pair<std::int64_t, std::string>, std::int64_t> ours(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".json") || name.ends_with(".json.gz")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> counts;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto r = read_trace(files[i]);
    // HTA gives a trace without distributedInfo.rank rank 0; the directories here hold one such
    // trace at most.
    const std::int64_t rank = rank_of(*r, 0);
    for (const Event& e : r->events()) {
      if (internal::in_hta_frame(*r, e)) ++counts[{rank, std::string(r->category(e))}];
    }
  }
  return counts;
}

TEST(HtaEvents, FrameHoldsWhatHtasParserKeeps) {
  // CUDA, ROCm, MTIA, CPU-only, triton and two-rank traces; the call-stack test's own trace.
  for (const char* name :
       {"kineto-traces/trace_filter", "kineto-traces/amd_trace", "kineto-traces/cpu_only",
        "kineto-traces/triton_example", "kineto-traces/critical_path/alexnet",
        "hta-tests/tests/data/call_stack", "hta-tests/tests/data/mtia_inference_trace"}) {
    SCOPED_TRACE(name);
    const fs::path dir = fs::path(kPeers) / name;
    if (!fs::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared/peers)";
    std::string why;
    const nlohmann::json want = hta(dir.string(), "frame", why);
    if (!why.empty()) GTEST_SKIP() << why;
    std::map<std::pair<std::int64_t, std::string>, std::int64_t> theirs;
    for (const auto& row : want["frame"]) {
      theirs[{row["rank"].get<std::int64_t>(), row["category"].get<std::string>()}] =
          row["events"].get<std::int64_t>();
    }
    ASSERT_FALSE(theirs.empty());
    EXPECT_EQ(ours(dir), theirs);
  }
}

}  // namespace hta_events_test
}  // namespace opscope

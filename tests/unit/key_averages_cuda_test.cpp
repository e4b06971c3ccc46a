// key_averages() and table() with GPU time, as torch 1.13 builds them under Kineto, on a real
// A100 trace (../shared/peers/kineto-traces/nccl_parser_config): an operator's self CUDA time is
// the GPU work whose "External id" is its own, computed here straight from the trace's JSON, not
// through opscope's model; GPU work has rows of its own with CUDA time and no CPU time; the CUDA
// columns and the "Self CUDA time total" line appear.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "opscope/export.h"
#include "opscope/key_averages.h"
#include "opscope/trace_reader.h"
#include "support/test_support.h"

namespace opscope {
namespace key_averages_cuda_test {

const std::string kTrace =
    std::string(OPSCOPE_PEERS_DIR) + "/kineto-traces/nccl_parser_config/nccl_data.json.gz";

bool is_gpu_work(const std::string& cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}

// From the JSON alone: per operator name, the GPU work launched in it (us); per GPU work name,
// its durations (us).
struct Expected {
  std::map<std::string, double> op_self_cuda_us;
  std::map<std::string, double> work_us;
  double all_work_us = 0;
};

Expected expected_from_json() {
  const nlohmann::json trace = nlohmann::json::parse(testing::read_gzip_file(kTrace));
  std::map<std::int64_t, std::string> op_of;  // External id -> operator name
  for (const auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (e.value("ph", "") == "X" && (cat == "cpu_op" || cat == "user_annotation") &&
        e.contains("args") && e["args"].contains("External id")) {
      op_of[e["args"]["External id"].get<std::int64_t>()] = e["name"].get<std::string>();
    }
  }
  Expected x;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !is_gpu_work(e.value("cat", ""))) continue;
    const double dur = e["dur"].get<double>();
    x.work_us[e["name"].get<std::string>()] += dur;
    x.all_work_us += dur;
    if (!e["args"].contains("External id")) continue;
    const auto op = op_of.find(e["args"]["External id"].get<std::int64_t>());
    if (op != op_of.end()) x.op_self_cuda_us[op->second] += dur;
  }
  return x;
}

TEST(KeyAveragesCuda, SelfCudaTimeIsTheWorkLaunchedInEachOperator) {
  const Expected want = expected_from_json();
  ASSERT_GT(want.op_self_cuda_us.size(), 10u);
  const auto result = read_trace(kTrace);
  const KeyAverages averages = key_averages(*result);
  std::map<std::string, const FunctionEventAvg*> row;
  for (const FunctionEventAvg& r : averages.rows()) row[r.key] = &r;

  for (const auto& [name, us] : want.op_self_cuda_us) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(row.count(name));
    EXPECT_FALSE(row[name]->is_device);
    // The trace's times are us with 3 decimals: ns, exactly.
    EXPECT_NEAR(static_cast<double>(row[name]->self_cuda_time_total_ns) / 1000.0, us, 0.01);
    EXPECT_GE(row[name]->cuda_time_total_ns, row[name]->self_cuda_time_total_ns);
  }
  double device_rows_us = 0;
  for (const auto& [name, us] : want.work_us) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(row.count(name));
    EXPECT_TRUE(row[name]->is_device);
    EXPECT_EQ(row[name]->cpu_time_total_ns, 0);
    EXPECT_NEAR(static_cast<double>(row[name]->self_cuda_time_total_ns) / 1000.0, us, 0.01);
    device_rows_us += static_cast<double>(row[name]->self_cuda_time_total_ns) / 1000.0;
  }
  EXPECT_NEAR(device_rows_us, want.all_work_us, 0.1);
  // The launches are rows of CPU time, as torch shows cudaLaunchKernel.
  ASSERT_TRUE(row.count("cudaLaunchKernel"));
  EXPECT_GT(row["cudaLaunchKernel"]->self_cpu_time_total_ns, 0);
  EXPECT_EQ(row["cudaLaunchKernel"]->self_cuda_time_total_ns, 0);
}

TEST(KeyAveragesCuda, TheTableHasTorchsCudaColumnsAndTotal) {
  const auto result = read_trace(kTrace);
  TableOptions o;
  o.sort_by = "self_cuda_time_total";
  o.row_limit = 8;
  const std::string table = key_averages(*result).table(o);
  const std::size_t header = table.find("CPU time avg");
  ASSERT_NE(header, std::string::npos) << table;
  const std::string line = table.substr(header, table.find('\n', header) - header);
  const std::size_t self_cuda = line.find("Self CUDA");
  const std::size_t share = line.find("Self CUDA %");
  const std::size_t total = line.find("CUDA total");
  const std::size_t avg = line.find("CUDA time avg");
  const std::size_t calls = line.find("# of Calls");
  EXPECT_TRUE(self_cuda < share && share < total && total < avg && avg < calls) << line;

  const Expected want = expected_from_json();
  char expected_total[64];
  std::snprintf(expected_total, sizeof expected_total, "Self CUDA time total: %.3fms\n",
                want.all_work_us / 1000.0);
  EXPECT_NE(table.find(expected_total), std::string::npos) << expected_total << table;
  // Sorted by self CUDA time, the first row is the GPU work (or operator) with the most.
  double most = 0;
  std::string most_name;
  const KeyAverages averages = key_averages(*result);
  for (const FunctionEventAvg& r : averages.rows()) {
    if (static_cast<double>(r.self_cuda_time_total_ns) > most) {
      most = static_cast<double>(r.self_cuda_time_total_ns);
      most_name = r.key;
    }
  }
  const std::size_t separator = table.find("\n-", header);  // the line under the headers
  const std::size_t row_start = table.find('\n', separator + 1) + 1;
  const std::string first_row = table.substr(row_start, table.find('\n', row_start) - row_start);
  EXPECT_NE(first_row.find(most_name.substr(0, 20)), std::string::npos) << most_name << "\n"
                                                                        << first_row;
}

TEST(KeyAveragesCuda, ACpuOnlyResultHasNoCudaColumns) {
  const auto result =
      read_trace(std::string(OPSCOPE_PEERS_DIR) +
                 "/kineto-traces/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  const std::string table = key_averages(*result).table();
  EXPECT_EQ(table.find("CUDA"), std::string::npos) << table;
}

}  // namespace key_averages_cuda_test
}  // namespace opscope

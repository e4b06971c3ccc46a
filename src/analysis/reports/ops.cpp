// The "ops" report: the operator table of key_averages() per rank (opscope's, not HTA's),
// declared in opscope/trace_analysis.h as operator_report().
#include <vector>

#include "analysis/report_catalog.h"
#include "opscope/key_averages.h"
#include "opscope/trace_analysis.h"

namespace opscope {

Report operator_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                       const ReportOptions& options) {
  Report r;
  r.name = "ops";
  r.columns = {"rank",
               "Name",
               "Self CPU %",
               "Self CPU (us)",
               "CPU total (us)",
               "CPU time avg (us)",
               "Self CUDA (us)",
               "CUDA total (us)",
               "CUDA time avg (us)",
               "CPU Mem (B)",
               "Self CPU Mem (B)",
               "CUDA Mem (B)",
               "Self CUDA Mem (B)",
               "# of Calls"};
  const auto us = [](double ns) { return ns / 1000.0; };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::int64_t rank =
        rank_of(*ranks[i], options.first_position + static_cast<std::int64_t>(i));
    const KeyAverages avg = key_averages(*ranks[i]);
    for (const FunctionEventAvg& row : avg.rows()) {
      r.rows.push_back({rank, row.key, row.self_cpu_percent_total,
                        us(static_cast<double>(row.self_cpu_time_total_ns)),
                        us(static_cast<double>(row.cpu_time_total_ns)), us(row.cpu_time_avg_ns()),
                        us(static_cast<double>(row.self_cuda_time_total_ns)),
                        us(static_cast<double>(row.cuda_time_total_ns)), us(row.cuda_time_avg_ns()),
                        row.cpu_memory_usage, row.self_cpu_memory_usage, row.cuda_memory_usage,
                        row.self_cuda_memory_usage, row.count});
    }
  }
  return r;
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_operator_table",
     .table = "ops",
     .form = ReportMethod::Form::kRankTable,
     .doc =
         "opscope's operator table (key_averages() with torch's column names, times in us), one\n"
         "row per operator, runtime call and GPU kernel, copy or set, and rank; every rank by\n"
         "default. CUDA columns: the GPU work launched in each operator. Not an HTA method."}};

}  // namespace

const ReportEntry& ops_report_row() {
  static const ReportEntry row{
      .kind = {.name = "ops",
               .hta = "key_averages().table()",
               .summary = "the operator table, per rank: operators and runtime calls (CPU time), "
                          "GPU work (CUDA time), an operator's CUDA time being the work launched "
                          "in it, and the bytes of the trace's [memory] events in it (CPU and "
                          "CUDA, with its children's and without)",
               .reads_cpu_range_args = true,
               .reads_flows = false,
               .reads_cpu_ranges = true,
               .methods = kMethods},
      .order = 100,
      .run = one_table<operator_report>};
  return row;
}

}  // namespace opscope::internal

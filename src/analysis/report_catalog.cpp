// report_kinds() and run_report(): every report by name, for the command line
// (tools/analyze_command.cpp) and the Python package alike. A new report is one row here.
#include <algorithm>
#include <string>

#include "opscope/error.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

struct Entry {
  ReportKind kind;
  std::vector<Report> (*run)(Ranks, const ReportOptions&);
};

template <Report (*F)(Ranks, const ReportOptions&)>
std::vector<Report> one(Ranks ranks, const ReportOptions& options) {
  std::vector<Report> out;
  out.push_back(F(ranks, options));
  return out;
}

const Entry kEntries[] = {
    {{"temporal", "get_temporal_breakdown",
      "per rank: idle, compute and non-compute GPU time over the span from the first GPU "
      "activity to the end of the last"},
     one<temporal_breakdown>},
    {{"idle", "get_idle_time_breakdown",
      "per rank and stream: the gaps between GPU work by cause: host_wait (launched after the "
      "previous kernel ended), kernel_wait (back to back, under 30 us), other"},
     one<idle_time_breakdown>},
    {{"kernels", "get_gpu_kernel_breakdown",
      "GPU time by kernel type over all ranks (kernel_type), and per rank and type the top "
      "kernels with their statistics, the rest as \"others\" (kernels)"},
     gpu_kernel_breakdown},
    {{"kernel-dist", "get_gpu_kernel_breakdown's per-kernel charts",
      "the top kernels of each type: per rank, the count, total and spread of their durations"},
     one<kernel_duration_distribution>},
    {{"overlap", "get_comm_comp_overlap",
      "per rank: the share of communication-kernel time that computation overlapped"},
     one<comm_comp_overlap>},
    {{"launch", "get_cuda_kernel_launch_stats",
      "per rank: each kernel launch's runtime-call duration, kernel duration and launch delay "
      "(launch), and the short kernels and outliers among them (launch_summary)"},
     cuda_kernel_launch_stats},
    {{"patterns", "get_frequent_cuda_kernel_sequences",
      "per rank: the kernel sequences the operators named by --operator launched, with how "
      "often and how long",
      /*reads_cpu_range_args=*/false, /*reads_flows=*/false, /*reads_cpu_ranges=*/true},
     one<frequent_cuda_kernel_sequences>},
    {{"queue",
      "get_queue_length_summary, get_memory_bw_summary, get_time_spent_blocked_on_full_queue",
      "per rank and stream: the launch queue's length (queue_length) and the time it was full "
      "(queue_full); per rank and kind of copy: the copy bandwidth in GB/s (memory_bw)",
      // queue_full's trace duration runs from the first kept event of any kind to the last
      /*reads_cpu_range_args=*/false, /*reads_flows=*/false, /*reads_cpu_ranges=*/true,
      /*reads_other_args=*/true},
     queue_report},
    {{"counters", "get_queue_length_time_series, get_memory_bw_time_series",
      "per rank: each change of a stream's launch queue length (queue_length_time_series) and "
      "of a kind of copy's bandwidth (memory_bw_time_series), over time",
      /*reads_cpu_range_args=*/false, /*reads_flows=*/false, /*reads_cpu_ranges=*/true,
      /*reads_other_args=*/true},
     counter_series_report},
    {{"ops", "key_averages().table()",
      "the operator table, per rank: operators and runtime calls (CPU time), GPU work (CUDA "
      "time), an operator's CUDA time being the work launched in it, and the bytes of the "
      "trace's [memory] events in it (CPU and CUDA, with its children's and without)",
      /*reads_cpu_range_args=*/true, /*reads_flows=*/false, /*reads_cpu_ranges=*/true},
     one<operator_report>},
};

}  // namespace

std::span<const ReportKind> report_kinds() {
  static const std::vector<ReportKind> kinds = [] {
    std::vector<ReportKind> v;
    for (const Entry& e : kEntries) v.push_back(e.kind);
    return v;
  }();
  return kinds;
}

std::vector<Report> run_report(std::string_view name, Ranks ranks, const ReportOptions& options) {
  for (const Entry& e : kEntries) {
    if (e.kind.name == name) return e.run(ranks, options);
  }
  std::string allowed;
  for (const Entry& e : kEntries)
    allowed += (allowed.empty() ? "" : ", ") + std::string(e.kind.name);
  throw Error("unknown report '" + std::string(name) + "'; reports: " + allowed);
}

TraceReadOptions what_reports_read(std::span<const std::string> reports) {
  TraceReadOptions read;
  read.cpu_range_args = false;
  read.flows = false;
  read.cpu_ranges = false;
  read.other_args = false;
  for (const ReportKind& k : report_kinds()) {
    if (std::find(reports.begin(), reports.end(), k.name) == reports.end()) continue;
    read.cpu_range_args = read.cpu_range_args || k.reads_cpu_range_args;
    read.flows = read.flows || k.reads_flows;
    read.cpu_ranges = read.cpu_ranges || k.reads_cpu_ranges || k.reads_cpu_range_args;
    read.other_args = read.other_args || k.reads_other_args;
  }
  return read;
}

}  // namespace opscope

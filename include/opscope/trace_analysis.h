// opscope/trace_analysis.h: Holistic-Trace-Analysis-class reports over results, per rank.
//
// A result read from a trace (read_trace() in opscope/export.h) or recorded by a Profiler is
// one rank. Reports take every rank of a job and answer with rows under the column names of
// Holistic Trace Analysis's DataFrames, so that its users read the same tables:
//
//   std::vector<std::shared_ptr<const opscope::ProfilerResult>> ranks = {
//       opscope::read_trace("rank-0.json.gz"), opscope::read_trace("rank-1.json.gz")};
//   opscope::Report r = opscope::temporal_breakdown(ranks);
//   std::cout << opscope::format_reports({&r, 1}, opscope::ReportFormat::kText);
//
// Times in the rows are microseconds, as in HTA.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "opscope/result.h"

namespace opscope {

// A report's value; a double may be NaN where HTA's would be (no value: null in JSON).
using ReportCell = std::variant<std::int64_t, double, std::string>;

// One table: `columns` names each cell of every row.
struct Report {
  std::string name;  // "temporal", ...
  std::vector<std::string> columns;
  std::vector<std::vector<ReportCell>> rows;
};

// The settings of every report, each with HTA's default; a report reads the ones it names.
struct ReportOptions {
  // Whether to leave out the last profiler step and the GPU work it launched, as HTA does:
  // -1 decides from the ranks given (at least two distinct ProfilerStep#N names), 0 keeps
  // everything, 1 drops it. A caller that analyzes the ranks of one job one at a time (the
  // Python package over dask workers) decides once for the job and passes 0 or 1.
  int drop_last_step = -1;
  // kernels, kernel-dist
  double duration_ratio = 0.8;
  std::size_t num_kernels = 10;
  // idle
  double consecutive_kernel_delay_us = 30;
  // launch
  double runtime_cutoff_us = 50;
  double launch_delay_cutoff_us = 100;
  bool include_memory_events = true;
  // patterns: the operator whose launches are grouped (a substring of its name, as in HTA;
  // empty: every top-level operator), and the fewest kernels a sequence has.
  std::string operator_name;
  std::size_t min_pattern_len = 3;
};

// The rank of a result: its distributedInfo.rank, else `fallback` (its position among the
// traces given).
std::int64_t rank_of(const ProfilerResult& r, std::int64_t fallback);

// How HTA classifies a GPU kernel by name: "COMMUNICATION" (NCCL and the like), "MEMORY"
// (memcpy, memset, dma), "COMPUTATION" or "OTHER" (synchronizations, ...).
std::string_view kernel_type(std::string_view name);

// HTA's get_temporal_breakdown: per rank, the span from the first GPU activity to the end of
// the last (kernel_time), the part of it no stream was busy (idle_time), the part computation
// kernels ran (compute_time), and the rest (non_compute_time), with their percentages.
Report temporal_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                          const ReportOptions& options = {});

// HTA's get_comm_comp_overlap: per rank, the share of communication-kernel time (their union)
// during which computation kernels ran too, in percent (NaN without communication).
Report comm_comp_overlap(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                         const ReportOptions& options = {});

// HTA's get_gpu_kernel_breakdown, two tables. "kernel_type": GPU time by kernel type over all
// ranks, the union of each type's kernels cut where types overlap ("COMPUTATION overlapping
// COMMUNICATION"), in whole microseconds per piece as HTA counts them, with each piece's
// share in percent (one decimal). "kernels": per rank and type (COMPUTATION, COMMUNICATION,
// MEMORY), each kernel's total, max, min, mean and standard deviation of its durations;
// past options.num_kernels kernels of a type, those beyond the top num_kernels or beyond
// options.duration_ratio of the type's cumulative time are summed as "others", whose statistics
// are over the totals of the kernels it holds (HTA's definition).
std::vector<Report> gpu_kernel_breakdown(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks,
    const ReportOptions& options = {});

// HTA's get_idle_time_breakdown, for every rank: per stream, the gaps before each kernel,
// copy or set, by cause: host_wait (the launching runtime call began after the previous
// kernel ended: the CPU was late), kernel_wait (a gap shorter than
// options.consecutive_kernel_delay_us between back-to-back kernels), other; each with its share
// of the stream's idle time.
Report idle_time_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                           const ReportOptions& options = {});

// The CPU operator table of key_averages() for every rank: one row per operator and rank
// with torch's column names (times in microseconds).
Report operator_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks);

// (More reports: declared here, implemented in src/analysis/<topic>_reports.cpp, listed in
// report_kinds() by src/analysis/report_catalog.cpp.)

// A report `opscope analyze --report NAME` and run_report() know.
struct ReportKind {
  std::string_view name;     // "temporal", ...
  std::string_view hta;      // the HTA method it answers like
  std::string_view summary;  // one line for --help
};
std::span<const ReportKind> report_kinds();

// The report `name` (one of report_kinds()) over every rank, as one table or more (the
// "kernels" report is two: kernel_type and kernels). Throws Error for an unknown name.
std::vector<Report> run_report(std::string_view name,
                               std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                               const ReportOptions& options = {});

enum class ReportFormat { kText, kJson, kCsv };
// format_reports() (opscope/export.h) writes reports in each format.

}  // namespace opscope

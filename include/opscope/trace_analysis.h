// opscope/trace_analysis.h: Holistic-Trace-Analysis-class reports over results, per rank.
//
// A result read from a trace (read_trace() in opscope/trace_reader.h) or recorded by a Profiler is
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
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "opscope/result.h"
#include "opscope/trace_reader.h"

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
  // -1 decides for each trace from its own events (at least two distinct ProfilerStep#N
  // names), so that a rank's numbers never depend on the other traces given; 0 keeps
  // everything, 1 drops it from every trace (one without a step then keeps nothing, as in
  // HTA). The Python package, a drop-in for HTA, decides once for the job as HTA does (over
  // the union of profiler_step_names()) and passes 0 or 1.
  int drop_last_step = -1;
  // The position of ranks[0] among the traces of the job: a trace without distributedInfo.rank
  // takes its position as its rank. A caller analyzing ranks one at a time passes each one's.
  std::int64_t first_position = 0;
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
  // queue: the launch queue's capacity per stream (CUDA's, HTA's
  // CUDA_MAX_LAUNCH_QUEUE_PER_STREAM); at this length a launch blocks the CPU.
  std::size_t max_queue_length = 1024;
  // critical-path (HTA's critical_path_analysis arguments): the annotation whose instances
  // bound the window (a substring of event names; empty: the whole trace), the instances
  // [instance_start, instance_end] taken as a Python slice of them in HTA's order, the
  // substrings naming data-loading events, and whether each kernel not launched on the path
  // still gets a zero-weight launch edge (HTA's CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1).
  std::string annotation;
  std::int64_t instance_start = 0;
  std::int64_t instance_end = 0;
  std::vector<std::string> data_load_events;
  bool add_zero_weight_launch_edges = false;
};

// The rank of a result: its distributedInfo.rank, else `fallback` (its position among the
// traces given).
std::int64_t rank_of(const ProfilerResult& r, std::int64_t fallback);

// The distinct ProfilerStep#N names of a result, sorted. HTA decides whether to leave out the
// last step over the job (two or more distinct names over every rank); the Python package
// collects these per rank to decide as HTA does (src/analysis/profiler_steps.cpp), while
// ReportOptions::drop_last_step -1 decides per trace.
std::vector<std::string> profiler_step_names(const ProfilerResult& r);

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
Report operator_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                       const ReportOptions& options = {});

// The counters of HTA's trace_counters.py (src/analysis/counter_series.cpp). A stream's
// queue length is the number of kernels, copies and sets launched on it (by cudaLaunchKernel,
// cudaMemcpyAsync, hipLaunchKernel, ...) that have not started yet: +1 at the launching
// call's start, -1 at the work's start. A kind of copy's bandwidth ("Memcpy DtoH", "Memset",
// ...) is the sum of the "memory bandwidth (GB/s)" of the copies of that kind running at a
// time, over every stream. Like every report these leave out the last profiler step as HTA
// does (ReportOptions::drop_last_step), and cover every rank given (HTA's default is rank 0).

// HTA's get_queue_length_time_series: a row per change of a stream's queue length, per rank,
// stream and time. ts counts microseconds from the earliest event of all the ranks given, as
// HTA aligns its traces; pid and tid are the GPU work's. Columns rank (HTA returns a dict by
// rank), ts, pid, tid, stream, queue_length.
Report queue_length_time_series(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                const ReportOptions& options = {});

// HTA's get_memory_bw_time_series: a row per change of a kind of copy's bandwidth (GB/s), per
// rank, kind and time (ts as above). Columns rank, ts, pid, name, memory_bw_gbps.
Report memory_bw_time_series(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                             const ReportOptions& options = {});

// HTA's get_queue_length_summary ("queue_length"): per rank and stream, pandas' describe()
// of the queue lengths of the time series (count, mean, std, min, 25%, 50%, 75%, max).
Report queue_length_summary(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                            const ReportOptions& options = {});

// HTA's get_memory_bw_summary ("memory_bw"): per rank and kind of copy, describe() of the
// bandwidths of the time series while some copy of the kind runs (the points above 0).
Report memory_bw_summary(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                         const ReportOptions& options = {});

// HTA's get_time_spent_blocked_on_full_queue ("queue_full"): per rank and stream whose queue
// reached options.max_queue_length, the microseconds it stayed there
// (duration_at_max_queue_length) and their share of the rank's trace, from its first event's
// start to its last one's (relative_duration_at_max_queue_length). HTA keeps one stream per
// rank (the last); this reports every stream.
Report time_blocked_on_full_queue(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                  const ReportOptions& options = {});

// The "queue" report: queue_length_summary, memory_bw_summary, time_blocked_on_full_queue.
std::vector<Report> queue_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                 const ReportOptions& options = {});

// The "counters" report: queue_length_time_series and memory_bw_time_series.
std::vector<Report> counter_series_report(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks,
    const ReportOptions& options = {});

// What trace_diff() compares; every field has HTA's default (TraceDiff.compare_traces).
struct DiffOptions {
  // The ranks of each side whose events are summed; empty: the smallest rank of that side.
  std::vector<std::int64_t> control_ranks;
  std::vector<std::int64_t> test_ranks;
  // The ProfilerStep#N iterations of each side; empty: the smallest N of that side. An event
  // belongs to the step its start lies in (CPU side) or to its launcher's (GPU side).
  std::vector<std::int64_t> control_iterations;
  std::vector<std::int64_t> test_iterations;
  enum class Device { kAll, kCpu, kGpu };
  Device device = Device::kAll;  // kCpu: events without a stream; kGpu: GPU work
  bool short_names = false;      // group by HTA's shorten_name (no arguments, no templates)
  std::string control_label = "Control";  // the column prefixes ("Control_counts")
  std::string test_label = "Test";
  // The step spans themselves (ProfilerStep#N, and the GPU's copy of the annotation) are
  // matched by position among the iterations compared: with iterations 4 of the control and 5
  // of the test, both are one row, "ProfilerStep#4 (Test #5)", unchanged when they ran once
  // each. HTA matches them by name, and so lists ProfilerStep#4 as deleted and #5 as added
  // (false: as HTA does, which the Python API keeps).
  bool match_steps_by_position = false;
};

// HTA's TraceDiff between two traces (each the results of its ranks, in any order; a rank is
// distributedInfo.rank, else the position among its side's results). Two tables:
// "ops_diff", one row per operator or kernel name with {label}_counts, {label}_total_duration
// (us) for each side, diff_counts and diff_duration (test minus control) and
// counts_change_categories ("+", "-", "="), the control's names first (sorted), then the
// test-only ones (sorted); "ops_summary", the names by category (added, deleted, increased,
// decreased, unchanged) as HTA's ops_diff lists them. Throws Error naming the side and the
// values it has for a rank or iteration it lacks, or a side without ProfilerStep#N.
std::vector<Report> trace_diff(std::span<const std::shared_ptr<const ProfilerResult>> control,
                               std::span<const std::shared_ptr<const ProfilerResult>> test,
                               const DiffOptions& options = {});

// HTA's shorten_name: a kernel or operator name without its return type, template and
// function arguments ("void at::native::kernel<float>(int)" -> "at::native::kernel");
// memory kernels ("Memcpy HtoD ...") unchanged.
std::string shorten_name(std::string_view name);

// HTA's get_cuda_kernel_launch_stats, for every rank (HTA: rank 0 unless told), two tables.
// "launch": one row per GPU kernel (and, with options.include_memory_events, memcpy and
// memset) and the runtime call that launched it (cudaLaunchKernel, cudaLaunchKernelExC,
// cudaMemcpyAsync, cudaMemsetAsync), paired by correlation id: the call's duration
// (cpu_duration), the kernel's (gpu_duration), and the time from the call's end to the kernel's
// start (launch_delay, 0 when the kernel began first); rows in the order the calls began
// (HTA's: the order of the trace file, which a read trace does not keep).
// "launch_summary": per rank, the counts HTA's histograms show: launches, short_kernels
// (a call of at most options.runtime_cutoff_us launching a kernel shorter than the call),
// runtime_outliers (calls longer than the cutoff), launch_delay_outliers (delays over
// options.launch_delay_cutoff_us), and the median and 95th percentile of the delay.
std::vector<Report> cuda_kernel_launch_stats(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks,
    const ReportOptions& options = {});

// The per-rank duration distribution of the kernels get_gpu_kernel_breakdown shows one by one
// (the top kernels of each type, as options.num_kernels and options.duration_ratio pick them on
// each rank; never "others"): table "kernel_dist", one row per kernel and rank it ran on, with
// count, sum, mean, stddev, min, quartiles and max of its durations.
Report kernel_duration_distribution(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                    const ReportOptions& options = {});

// HTA's get_frequent_cuda_kernel_sequences, for every rank (HTA: one rank): the CPU operators
// whose name contains options.operator_name, at the shallowest call depth any of them has, that
// launched at least options.min_pattern_len GPU kernels (in their own calls or any nested one);
// each operator's name and its kernels' names in start order make a pattern. Table "patterns":
// per rank, each pattern, how often it occurred, and the summed kernel and operator durations;
// most frequent first. An empty operator_name (HTA requires one) takes every top-level operator.
Report frequent_cuda_kernel_sequences(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                      const ReportOptions& options = {});

// The edge types of HTA's CPEdgeType, in its order.
enum class CriticalPathEdgeType : std::uint8_t {
  kOperatorKernel = 0,     // "critical_path_operator": an operator's or kernel's span
  kDependency = 1,         // "critical_path_dependency": nested or consecutive CPU events
  kKernelLaunchDelay = 2,  // "critical_path_kernel_launch_delay": launch call -> kernel
  kKernelKernelDelay = 3,  // "critical_path_kernel_kernel_delay": kernel -> next on its stream
  kSyncDependency = 4,     // "critical_path_sync_dependency": a synchronization
};
// HTA's value of the type ("critical_path_operator", ...).
std::string_view critical_path_edge_type_name(CriticalPathEdgeType type);

// HTA's CPGraph of one rank (hta/analyzers/critical_path_analysis.py): a start and an end node
// per CPU operator, runtime call, data-loading event and GPU work item of the window, in
// (time, event) order; edges of HTA's types and weights (the CUDA runtime lock, the call
// stacks, launches, kernel-to-kernel gaps, stream, device and event synchronizations); the
// longest path as networkx's dag_longest_path picks it. Events are indices into r.events().
struct CriticalPathGraph {
  static constexpr std::int64_t kNoEvent = std::numeric_limits<std::int64_t>::min();
  bool found = false;  // the annotation names some event (else HTA returns None)
  bool valid = false;  // the longest path was found (HTA's success)
  std::int64_t window_start_ns = 0, window_end_ns = 0;
  std::vector<std::int32_t> node_event;
  std::vector<std::int64_t> node_ts_ns;
  std::vector<std::uint8_t> node_is_start, node_is_blocking;
  // Edges in the order HTA adds them to its networkx graph.
  std::vector<std::int32_t> edge_begin, edge_end;  // node ids
  std::vector<CriticalPathEdgeType> edge_type;
  std::vector<std::int64_t> edge_weight_ns;        // the edge's weight (HTA's CPEdge.weight)
  std::vector<std::int64_t> edge_graph_weight_ns;  // as the longest path reads it (<= -1 us: 0)
  std::vector<std::int64_t> edge_event;   // the event the edge is attributed to (-1: the root);
                                          // kNoEvent: none (only spans and gaps have one)
  std::vector<std::int32_t> graph_nodes;  // the nodes with edges, in networkx's order
  std::vector<std::int32_t> path_nodes;   // the longest path
  std::vector<std::int32_t> path_edges;   // its edges (indices into the edge vectors)
  std::int64_t path_length_ns = 0;
  // HTA's _get_cuda_event_record_df: each cudaEventRecord whose CUDA event a synchronization
  // waits on, with the stream and GPU it was recorded on and the last launch onto them before
  // it (-1: none), in time order.
  struct EventRecord {
    std::int32_t event = -1;
    std::int64_t stream = -1, gpu = -1;
    std::int32_t previous_launch = -1;
  };
  std::vector<EventRecord> event_records;
  // HTA's _get_cuda_stream_wait_event_df: each cudaStreamWaitEvent with the stream that waits
  // and the next launch onto it from the same thread (-1: none), in time order.
  struct StreamWait {
    std::int32_t event = -1;
    std::int64_t stream = -1;
    std::int32_t next_launch = -1;
  };
  std::vector<StreamWait> stream_waits;
  std::vector<std::string> warnings;  // why the path is not valid, or what was skipped
};

// HTA's critical_path_analysis(rank, annotation, instance_id, data_load_events) on one rank,
// with the window and options of `options` (annotation, instance_start, instance_end,
// data_load_events, add_zero_weight_launch_edges). Linear in events but for sorts.
CriticalPathGraph critical_path_graph(const ProfilerResult& r, const ReportOptions& options = {});

// HTA's BoundType of an edge on the path, from the edge's type and its event's name and
// stream (get_critical_path_breakdown's bound_by): "" for dependencies.
std::string_view critical_path_bound_by(CriticalPathEdgeType type, std::string_view short_name,
                                        std::int64_t stream,
                                        std::span<const std::string> data_load_events);

// A method of HTA's TraceAnalysis that answers with a table of a report. The Python package's
// TraceAnalysis (python/opscope/analysis.py) has a method for each one a report names: made
// from it when its `form` says how, else written there by hand (HTA's signature needs more).
struct ReportMethod {
  std::string_view name = {};   // HTA's method name ("get_temporal_breakdown")
  std::string_view table = {};  // the Report::name it answers with (the first of several)
  enum class Form {
    kHandWritten,  // python/opscope/analysis.py defines it
    kJobTable,     // (visualize=True) -> DataFrame: the table over every rank
    kRankTable,    // (ranks=None) -> DataFrame: the table over `ranks`, every rank by default
    kDescribe,     // (ranks=None) -> DataFrame: a describe() table indexed by the columns
                   // before "count", under `series`; rank 0 by default, as in HTA
    kSeries,       // (ranks=None) -> {rank: DataFrame}: run over every rank at once (the
                   // times count from the job's first event); rank 0 by default, as in HTA
  };
  Form form = Form::kHandWritten;
  std::string_view doc = {};     // the method's docstring, for the forms made from the row
  std::string_view series = {};  // kDescribe: the name over describe()'s columns
};

// A report `opscope analyze --report NAME` and run_report() know. A report is a file of
// src/analysis/reports/ holding its function and this row (src/analysis/report_catalog.h):
// run_report() reaches it by name, so it needs no declaration here. The functions declared above
// are the reports that came before that, kept for their callers.
struct ReportKind {
  std::string_view name = {};     // "temporal", ...
  std::string_view hta = {};      // the HTA method it answers like
  std::string_view summary = {};  // one line for --help
  // What the report reads beyond every event's name, kind, times and thread and the args of
  // GPU work and runtime calls: a trace read for it alone may leave the rest out
  // (TraceReadOptions in opscope/trace_reader.h; tests/unit/analyze_test.cpp checks each report the
  // same either way).
  bool reads_cpu_range_args = false;  // input shapes, External id, ... of operators
  bool reads_flows = false;           // flow events
  // CPU ranges other than the profiler steps (implied by reads_cpu_range_args).
  bool reads_cpu_ranges = false;
  bool reads_other_args = false;  // the args no field holds (a copy's "memory bandwidth (GB/s)")
  // The ReportOptions fields it reads by their names ("num_kernels", ...), beyond
  // drop_last_step and first_position, which every report reads.
  std::span<const std::string_view> options = {};
  std::span<const ReportMethod> methods = {};  // HTA's methods it answers
};
std::span<const ReportKind> report_kinds();

// What a read must keep for the reports named `reports` (ReportKind::name, as run_report()
// takes them; unknown names ask for nothing): what `opscope analyze` reads for its --report.
TraceReadOptions what_reports_read(std::span<const std::string> reports);

// The report `name` (one of report_kinds()) over every rank, as one table or more (the
// "kernels" report is two: kernel_type and kernels). Throws Error for an unknown name.
std::vector<Report> run_report(std::string_view name,
                               std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                               const ReportOptions& options = {});

enum class ReportFormat { kText, kJson, kCsv, kHtml };
// format_reports() (opscope/report_output.h) writes reports in each format.

}  // namespace opscope

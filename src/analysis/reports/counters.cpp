// The "counters" report: HTA's get_queue_length_time_series and get_memory_bw_time_series
// (hta/analyzers/trace_counters.py), the time series of counters.h in HTA's aligned
// microseconds, declared in opscope/trace_analysis.h; tests/unit/analyze_counter_reports_test.cpp
// runs HTA beside them on real traces.
#include "analysis/counters.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::per_rank_report;
using internal::Ranks;
using internal::us;

}  // namespace

Report queue_length_time_series(Ranks ranks, const ReportOptions& options) {
  const std::int64_t origin = internal::aligned_origin_ns(ranks);
  return per_rank_report(
      "queue_length_time_series", {"rank", "ts", "pid", "tid", "stream", "queue_length"}, ranks,
      options, [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        for (const internal::QueuePoint& p : internal::queue_length_series(r, drop_last)) {
          add({rank, us(p.ts_ns - origin), p.pid, p.tid, p.stream, p.queue_length});
        }
      });
}

Report memory_bw_time_series(Ranks ranks, const ReportOptions& options) {
  const std::int64_t origin = internal::aligned_origin_ns(ranks);
  return per_rank_report(
      "memory_bw_time_series", {"rank", "ts", "pid", "name", "memory_bw_gbps"}, ranks, options,
      [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        for (const internal::BandwidthPoint& p : internal::memory_bw_series(r, drop_last)) {
          add({rank, us(p.ts_ns - origin), p.pid, p.name, p.gbps});
        }
      });
}

std::vector<Report> counter_series_report(Ranks ranks, const ReportOptions& options) {
  std::vector<Report> out;
  out.push_back(queue_length_time_series(ranks, options));
  out.push_back(memory_bw_time_series(ranks, options));
  return out;
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_queue_length_time_series",
     .table = "queue_length_time_series",
     .form = ReportMethod::Form::kSeries,
     .doc =
         "{rank: DataFrame} of each change of a stream's launch queue length: ts (us from the\n"
         "job's first event), pid, tid, stream, queue_length. ``ranks`` defaults to [0]; a rank\n"
         "without launches is left out, as in HTA."},
    {.name = "get_memory_bw_time_series",
     .table = "memory_bw_time_series",
     .form = ReportMethod::Form::kSeries,
     .doc = "{rank: DataFrame} of each change of a kind of copy's bandwidth: ts, pid, name\n"
            "(\"Memcpy HtoD\", \"Memset\", ...), memory_bw_gbps. ``ranks`` defaults to [0]."}};

}  // namespace

const ReportEntry& counters_report_row() {
  static const ReportEntry row{
      .kind = {.name = "counters",
               .hta = "get_queue_length_time_series, get_memory_bw_time_series",
               .summary = "per rank: each change of a stream's launch queue length "
                          "(queue_length_time_series) and of a kind of copy's bandwidth "
                          "(memory_bw_time_series), over time",
               .reads_cpu_range_args = false,
               .reads_flows = false,
               .reads_cpu_ranges = true,
               .reads_other_args = true,
               .methods = kMethods},
      .order = 90,
      .run = counter_series_report};
  return row;
}

}  // namespace opscope::internal

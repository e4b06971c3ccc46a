// The "queue" report: HTA's get_queue_length_summary, get_memory_bw_summary and
// get_time_spent_blocked_on_full_queue (hta/analyzers/trace_counters.py) over the time series
// of counters.h, declared in opscope/trace_analysis.h; tests/unit/analyze_counter_reports_test.cpp
// runs HTA beside them on real traces.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/counters.h"
#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::per_rank_report;
using internal::Ranks;
using internal::us;

// A row's describe() cells in HTA's column order: count, mean, std, min, 25%, 50%, 75%, max.
void append_describe(std::vector<ReportCell>& row, std::vector<double> values) {
  const internal::Describe d = internal::describe(std::move(values));
  row.insert(row.end(), {static_cast<std::int64_t>(d.count), d.mean, d.std, d.min, d.p25, d.p50,
                         d.p75, d.max});
}

std::vector<std::string> with_describe(std::vector<std::string> keys) {
  for (const char* c : {"count", "mean", "std", "min", "25%", "50%", "75%", "max"})
    keys.emplace_back(c);
  return keys;
}

// Calls on_run(first, last) for each run [first, last) of consecutive points of `series` that
// have the same key(point): the series are grouped by stream or by kind already.
template <typename Point, typename Key, typename OnRun>
void for_each_run(const std::vector<Point>& series, Key&& key, OnRun&& on_run) {
  for (std::size_t first = 0; first < series.size();) {
    std::size_t last = first + 1;
    while (last < series.size() && key(series[last]) == key(series[first])) ++last;
    on_run(first, last);
    first = last;
  }
}

}  // namespace

Report queue_length_summary(Ranks ranks, const ReportOptions& options) {
  return per_rank_report("queue_length", with_describe({"rank", "stream"}), ranks, options,
                         [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
                           const auto series = internal::queue_length_series(r, drop_last);
                           for_each_run(
                               series, [](const internal::QueuePoint& p) { return p.stream; },
                               [&](std::size_t first, std::size_t last) {
                                 std::vector<double> values;
                                 for (std::size_t t = first; t < last; ++t)
                                   values.push_back(static_cast<double>(series[t].queue_length));
                                 std::vector<ReportCell> row = {rank, series[first].stream};
                                 append_describe(row, std::move(values));
                                 add(std::move(row));
                               });
                         });
}

Report memory_bw_summary(Ranks ranks, const ReportOptions& options) {
  return per_rank_report("memory_bw", with_describe({"rank", "name"}), ranks, options,
                         [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
                           const auto series = internal::memory_bw_series(r, drop_last);
                           for_each_run(
                               series, [](const internal::BandwidthPoint& p) { return p.name; },
                               [&](std::size_t first, std::size_t last) {
                                 // Only the times some copy of the kind ran: HTA leaves out the
                                 // points where the bandwidth is back at 0 (and keeps the float
                                 // residue of the sum, > 0 by a hair).
                                 std::vector<double> values;
                                 for (std::size_t t = first; t < last; ++t) {
                                   if (series[t].gbps > 0) values.push_back(series[t].gbps);
                                 }
                                 // A kind whose every point is 0 (copies without a bandwidth arg)
                                 // has no row in HTA: its groupby sees no row of it.
                                 if (values.empty()) return;
                                 std::vector<ReportCell> row = {rank, series[first].name};
                                 append_describe(row, std::move(values));
                                 add(std::move(row));
                               });
                         });
}

Report time_blocked_on_full_queue(Ranks ranks, const ReportOptions& options) {
  const auto max_length = static_cast<std::int64_t>(options.max_queue_length);
  return per_rank_report(
      "queue_full",
      {"rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"},
      ranks, options, [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        const auto series = internal::queue_length_series(r, drop_last);
        // HTA's Trace.get_trace_duration: from the first start to the last start (not end) of
        // the rank's kept events.
        std::int64_t first_start = std::numeric_limits<std::int64_t>::max();
        std::int64_t last_start = std::numeric_limits<std::int64_t>::min();
        for (const std::int32_t k : internal::analyzed_events(r, drop_last)) {
          const Event& e = r.events()[static_cast<std::size_t>(k)];
          if (!internal::in_hta_frame(r, e)) continue;
          first_start = std::min(first_start, e.start_ns);
          last_start = std::max(last_start, e.start_ns);
        }
        const std::int64_t trace_ns = first_start <= last_start ? last_start - first_start : 0;
        // Each point at the limit lasts until the stream's next point; the last point of a
        // stream has no next and counts nothing (HTA's shift(-1) gives NaN, which sum skips).
        // HTA keeps its result in a dict keyed by rank, so only the last blocked stream of each
        // rank survives there; every blocked stream has its row here.
        for_each_run(
            series, [](const internal::QueuePoint& p) { return p.stream; },
            [&](std::size_t first, std::size_t last) {
              // Fits an int64: the stream's points are in time order, so these gaps are
              // disjoint and sum to at most the span, within 2^63 by the reader's rule.
              std::int64_t blocked_ns = 0;
              bool blocked = false;
              for (std::size_t t = first; t < last; ++t) {
                if (series[t].queue_length < max_length) continue;
                blocked = true;
                if (t + 1 < last) blocked_ns += series[t + 1].ts_ns - series[t].ts_ns;
              }
              if (!blocked) return;
              const double relative =
                  trace_ns > 0 ? static_cast<double>(blocked_ns) / static_cast<double>(trace_ns)
                               : std::numeric_limits<double>::quiet_NaN();
              add({rank, series[first].stream, us(blocked_ns), relative});
            });
      });
}

std::vector<Report> queue_report(Ranks ranks, const ReportOptions& options) {
  std::vector<Report> out;
  out.push_back(queue_length_summary(ranks, options));
  out.push_back(memory_bw_summary(ranks, options));
  out.push_back(time_blocked_on_full_queue(ranks, options));
  return out;
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"max_queue_length"};
constexpr ReportMethod kMethods[] = {
    {.name = "get_queue_length_summary",
     .table = "queue_length",
     .form = ReportMethod::Form::kDescribe,
     .doc = "Per rank and stream, describe() of the launch queue's length (the number of kernels,\n"
            "copies and sets launched but not started): index (rank, stream), columns\n"
            "(\"queue_length\", count|mean|std|min|25%|50%|75%|max). ``ranks`` defaults to [0].",
     .series = "queue_length"},
    {.name = "get_memory_bw_summary",
     .table = "memory_bw",
     .form = ReportMethod::Form::kDescribe,
     .doc = "Per rank and kind of copy (\"Memcpy DtoH\", \"Memset\", ...), describe() of the copy\n"
            "bandwidth in GB/s while a copy of that kind runs: index (rank, name), columns\n"
            "(\"memory_bw_gbps\", statistic). ``ranks`` defaults to [0].",
     .series = "memory_bw_gbps"},
    {.name = "get_time_spent_blocked_on_full_queue", .table = "queue_full"}};

}  // namespace

const ReportEntry& queue_report_row() {
  static const ReportEntry row{
      .kind = {.name = "queue",
               .hta = "get_queue_length_summary, get_memory_bw_summary, "
                      "get_time_spent_blocked_on_full_queue",
               .summary = "per rank and stream: the launch queue's length (queue_length) and the "
                          "time it was full (queue_full); per rank and kind of copy: the copy "
                          "bandwidth in GB/s (memory_bw)",
               .reads_cpu_range_args = false,
               .reads_flows = false,
               // queue_full's trace duration runs from the first kept event of any kind to the
               // last
               .reads_cpu_ranges = true,
               .reads_other_args = true,
               .options = kOptions,
               .methods = kMethods},
      .order = 80,
      .run = queue_report};
  return row;
}

}  // namespace opscope::internal

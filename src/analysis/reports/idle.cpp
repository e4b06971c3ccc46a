// The "idle" report: HTA's get_idle_time_breakdown (hta/analyzers/breakdown_analysis.py),
// declared in opscope/trace_analysis.h; tests/unit/analyze_golden_test.cpp compares it with HTA's
// own answers on real traces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_gpu_events;
using internal::per_rank_report;
using internal::round2;
using internal::stream_of;
using internal::us;

// pandas' describe() of `v` (us): count, mean, std, min, 25%, 50%, 75%, max; NaN where pandas
// has none (no values; std of one value).
std::vector<ReportCell> describe(std::vector<double> v) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  const auto q = [&](double p) {
    const double pos = p * (n - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  if (v.empty()) return {std::int64_t{0}, nan, nan, nan, nan, nan, nan, nan};
  double sum = 0;
  for (const double x : v) sum += x;
  const double mean = sum / n;
  double ss = 0;
  for (const double x : v) ss += (x - mean) * (x - mean);
  return {static_cast<std::int64_t>(v.size()),
          mean,
          v.size() > 1 ? std::sqrt(ss / (n - 1)) : nan,
          v.front(),
          q(0.25),
          q(0.5),
          q(0.75),
          v.back()};
}

// The idle table, and with `intervals` HTA's show_idle_interval_stats table ("idle_intervals":
// per rank, stream and category, describe() of the gaps in us, rows in rank order).
Report idle_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                   const ReportOptions& options, Report* intervals) {
  const auto delay_ns = static_cast<std::int64_t>(options.consecutive_kernel_delay_us * 1000.0);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> interval_rows;
  Report idle = per_rank_report(
      "idle", {"rank", "stream", "idle_category", "idle_time", "idle_time_ratio"}, ranks, options,
      [&](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        const std::vector<Event>& events = r.events();
        // The start of each launching runtime call, by correlation id (CPU side: no stream).
        std::vector<std::pair<std::int64_t, std::int64_t>> launch_start;
        for (const Event& e : events) {
          if (stream_of(r, e) >= 0) continue;
          const EventDetail* d = r.detail(e);
          if (d != nullptr && d->gpu.correlation > 0)
            launch_start.emplace_back(d->gpu.correlation, e.start_ns);
        }
        std::sort(launch_start.begin(), launch_start.end());
        struct Work {
          std::int64_t stream, start, end, launched;  // launched: -1 when the launch is unknown
        };
        std::vector<Work> work;
        for (const std::int32_t index : analyzed_gpu_events(r, drop_last)) {
          const Event& e = events[static_cast<std::size_t>(index)];
          // Kernels, copies and sets only: HTA leaves GPU-side waits (cuda_sync) out here.
          if (e.kind != EventKind::kKernel && e.kind != EventKind::kMemcpy &&
              e.kind != EventKind::kMemset) {
            continue;
          }
          const EventDetail* d = r.detail(e);
          std::int64_t launched = -1;
          if (d != nullptr && d->gpu.correlation > 0) {
            const auto it = std::lower_bound(
                launch_start.begin(), launch_start.end(),
                std::make_pair(d->gpu.correlation, std::numeric_limits<std::int64_t>::min()));
            if (it != launch_start.end() && it->first == d->gpu.correlation) launched = it->second;
          }
          work.push_back({stream_of(r, e), e.start_ns, e.end_ns, launched});
        }
        std::stable_sort(work.begin(), work.end(), [](const Work& a, const Work& b) {
          return a.stream != b.stream ? a.stream < b.stream : a.start < b.start;
        });
        for (std::size_t s = 0; s < work.size();) {
          std::size_t t = s;
          // Wide (util/wide_sums.h): gaps are negative where kernels of a stream overlap, and
          // their sum can pass INT64_MIN; the output is a double of microseconds.
          internal::WideSum idle[3] = {0, 0, 0};
          bool seen[3] = {false, false, false};
          std::vector<double> gaps[3];  // for `intervals`
          for (; t < work.size() && work[t].stream == work[s].stream; ++t) {
            if (t == s) {
              seen[2] = true;  // the first has no gap: an "other" of 0, as in HTA
              continue;
            }
            const std::int64_t prev_end = work[t - 1].end;  // the previous one's, not a running max
            const std::int64_t gap = work[t].start - prev_end;
            int category = 2;
            if (work[t].launched >= 0 && work[t].launched > prev_end) {
              category = 0;  // host_wait
            } else if (gap < delay_ns) {
              category = 1;  // kernel_wait
            }
            idle[category] += gap;
            if (intervals != nullptr) gaps[category].push_back(us(gap));
            seen[category] = true;
          }
          const internal::WideSum total = idle[0] + idle[1] + idle[2];
          static constexpr const char* kNames[] = {"host_wait", "kernel_wait", "other"};
          for (int c = 0; c < 3; ++c) {
            if (!seen[c]) continue;
            const double ratio =
                total != 0 ? round2(static_cast<double>(idle[c]) / static_cast<double>(total))
                           : std::numeric_limits<double>::quiet_NaN();
            add({rank, work[s].stream, std::string(kNames[c]), round2(internal::wide_us(idle[c])),
                 ratio});
            if (intervals != nullptr) {
              std::vector<ReportCell> row = {rank, work[s].stream, std::string(kNames[c])};
              for (ReportCell& cell : describe(std::move(gaps[c]))) row.push_back(std::move(cell));
              interval_rows.push_back({rank, std::move(row)});
            }
          }
          s = t;
        }
      });
  if (intervals != nullptr) {
    intervals->name = "idle_intervals";
    intervals->columns = {"rank", "stream", "idle_category", "count", "mean", "std",
                          "min",  "25%",    "50%",           "75%",   "max"};
    internal::sort_by_rank(interval_rows);
    for (auto& [rank, row] : interval_rows) intervals->rows.push_back(std::move(row));
  }
  return idle;
}

std::vector<Report> idle_tables(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                                const ReportOptions& options) {
  std::vector<Report> out(2);
  out[0] = idle_report(ranks, options, &out[1]);
  return out;
}

}  // namespace

Report idle_time_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                           const ReportOptions& options) {
  return idle_report(ranks, options, nullptr);
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"consecutive_kernel_delay_us"};
constexpr ChartLabel kLabel[] = {{"rank ", "rank"}, {", stream ", "stream"}};
constexpr ChartPart kParts[] = {
    {"host_wait", "crimson", ""}, {"kernel_wait", "royalblue", ""}, {"other", "gray", ""}};
// Per rank and stream, the idle time by cause.
constexpr ReportChart kCharts[] = {{.table = "idle",
                                    .kind = ReportChart::Kind::kStackedBars,
                                    .title = "Idle time per stream",
                                    .unit = "us",
                                    .label = kLabel,
                                    .parts = kParts,
                                    .series = "idle_category",
                                    .value = "idle_time"}};
constexpr ReportMethod kMethods[] = {{.name = "get_idle_time_breakdown", .table = "idle"}};

}  // namespace

const ReportEntry& idle_report_row() {
  static const ReportEntry row{
      .kind = {.name = "idle",
               .hta = "get_idle_time_breakdown",
               .summary =
                   "per rank and stream: the gaps between GPU work by cause: host_wait "
                   "(launched after the previous kernel ended), kernel_wait (back to back, "
                   "under 30 us), other; and describe() of the gaps of each (idle_intervals)",
               .options = kOptions,
               .methods = kMethods},
      .order = 20,
      .run = idle_tables,
      .charts = kCharts};
  return row;
}

}  // namespace opscope::internal

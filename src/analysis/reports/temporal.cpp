// The "temporal" report: HTA's get_temporal_breakdown (hta/analyzers/breakdown_analysis.py),
// declared in opscope/trace_analysis.h; tests/unit/analyze_golden_test.cpp compares it with HTA's
// own answers on real traces.
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
using internal::Interval;
using internal::length;
using internal::merged;
using internal::per_rank_report;
using internal::round2;
using internal::us;

}  // namespace

Report temporal_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                          const ReportOptions& options) {
  return per_rank_report(
      "temporal",
      {"rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
       "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"},
      ranks, options, [](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        std::vector<Interval> all;
        std::vector<Interval> compute;
        internal::KernelTypes kernel_type;
        for (const std::int32_t index : analyzed_gpu_events(r, drop_last)) {
          const Event& e = r.events()[static_cast<std::size_t>(index)];
          all.push_back({e.start_ns, e.end_ns});
          if (kernel_type(e.name) == "COMPUTATION") compute.push_back({e.start_ns, e.end_ns});
        }
        const std::vector<Interval> busy = merged(std::move(all));
        const std::int64_t kernel_time = busy.empty() ? 0 : busy.back().end - busy.front().start;
        const std::int64_t idle = kernel_time - length(busy);
        const std::int64_t compute_time = length(merged(std::move(compute)));
        const std::int64_t non_compute = kernel_time - compute_time - idle;
        const auto pct = [&](std::int64_t part) {
          return kernel_time > 0
                     ? round2(100.0 * static_cast<double>(part) / static_cast<double>(kernel_time))
                     : 0.0;
        };
        add(internal::make_row(rank, us(idle), us(compute_time), us(non_compute), us(kernel_time),
                               pct(idle), pct(compute_time), pct(non_compute)));
      });
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ChartLabel kLabel[] = {{"rank ", "rank"}};
constexpr ChartPart kParts[] = {{"compute", "seagreen", "compute_time_pctg"},
                                {"non-compute", "darkorange", "non_compute_time_pctg"},
                                {"idle", "silver", "idle_time_pctg"}};
// Per rank, the kernel time split into compute, non-compute and idle (percent).
constexpr ReportChart kCharts[] = {{.table = "temporal",
                                    .kind = ReportChart::Kind::kStackedBars,
                                    .title = "GPU time per rank",
                                    .unit = "%",
                                    .label = kLabel,
                                    .parts = kParts}};
constexpr ReportMethod kMethods[] = {
    {.name = "get_temporal_breakdown",
     .table = "temporal",
     .form = ReportMethod::Form::kJobTable,
     .doc = "Per rank: idle, compute and non-compute GPU time (us) over the span from the first\n"
            "GPU activity to the end of the last, with their percentages (every rank, as HTA)."}};

}  // namespace

const ReportEntry& temporal_report_row() {
  static const ReportEntry row{
      .kind = {.name = "temporal",
               .hta = "get_temporal_breakdown",
               .summary = "per rank: idle, compute and non-compute GPU time over the span from "
                          "the first GPU activity to the end of the last",
               .methods = kMethods},
      .order = 10,
      .run = one_table<temporal_breakdown>,
      .charts = kCharts};
  return row;
}

}  // namespace opscope::internal

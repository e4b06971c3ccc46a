// The "kernel-dist" report: the per-kernel duration charts of HTA's get_gpu_kernel_breakdown
// (hta/analyzers/breakdown_analysis.py) as a table, declared in opscope/trace_analysis.h as
// kernel_duration_distribution(); tests/unit/analyze_kernel_reports_test.cpp runs HTA beside it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/report_catalog.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_gpu_events;
using internal::describe;
using internal::Describe;
using internal::us;

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

}  // namespace

Report kernel_duration_distribution(Ranks ranks, const ReportOptions& options) {
  Report report;
  report.name = "kernel_dist";
  report.columns = {"kernel_type", "name",     "rank", "count", "sum (us)", "mean (us)",
                    "stddev",      "min (us)", "25%",  "50%",   "75%",      "max (us)"};
  // The kernels HTA charts are the named rows of its "kernels" table: the top kernels of each
  // type on each rank. Taking them from gpu_kernel_breakdown keeps the choice one definition.
  std::vector<std::pair<std::string, std::string>> shown;  // (kernel_type, name), sorted
  const std::vector<Report> breakdown = gpu_kernel_breakdown(ranks, options);
  for (const Report& table : breakdown) {
    if (table.name != "kernels") continue;
    const auto column = [&](std::string_view name) {
      return static_cast<std::size_t>(std::find(table.columns.begin(), table.columns.end(), name) -
                                      table.columns.begin());
    };
    const std::size_t name_at = column("name"), type_at = column("kernel_type");
    for (const std::vector<ReportCell>& row : table.rows) {
      const std::string& name = std::get<std::string>(row[name_at]);
      if (name != "others") shown.emplace_back(std::get<std::string>(row[type_at]), name);
    }
  }
  std::sort(shown.begin(), shown.end());
  shown.erase(std::unique(shown.begin(), shown.end()), shown.end());

  std::map<std::string, std::size_t, std::less<>> index_of;
  for (std::size_t s = 0; s < shown.size(); ++s) index_of.emplace(shown[s].second, s);

  // Per rank, each shown kernel's durations (us), in the order of `shown`.
  std::vector<std::pair<std::int64_t, std::vector<std::vector<double>>>> per_rank;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    std::vector<std::vector<double>> durations(shown.size());
    for (const std::int32_t k : analyzed_gpu_events(r, internal::drop_last_step(r, options))) {
      const Event& e = r.events()[static_cast<std::size_t>(k)];
      // The name decides the type, so the name alone finds the kernel.
      const auto it = index_of.find(e.name);
      if (it != index_of.end()) durations[it->second].push_back(us(e.duration_ns()));
    }
    per_rank.emplace_back(rank_of(r, options.first_position + static_cast<std::int64_t>(i)),
                          std::move(durations));
  }
  internal::sort_by_rank(per_rank);
  // Kernel by kernel, the ranks side by side: what HTA's per-kernel bar chart compares.
  for (std::size_t s = 0; s < shown.size(); ++s) {
    for (const auto& [rank, durations] : per_rank) {
      const std::vector<double>& v = durations[s];
      if (v.empty()) continue;  // it did not run there
      double sum = 0;
      for (double x : v) sum += x;
      const Describe d = describe(v);
      report.rows.push_back({shown[s].first, shown[s].second, rank,
                             static_cast<std::int64_t>(v.size()), sum, d.mean,
                             v.size() > 1 ? d.std : 0.0, d.min, d.p25, d.p50, d.p75, d.max});
    }
  }
  return report;
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"duration_ratio", "num_kernels"};
constexpr ChartLabel kLabel[] = {{"rank ", "rank"}};
// For each top kernel, its duration distribution on every rank as a box (25% to 75%) with
// whiskers (min to max) and the median, on one scale per kernel.
constexpr ReportChart kCharts[] = {{.table = "kernel_dist",
                                    .kind = ReportChart::Kind::kBoxes,
                                    .title = "Kernel durations across ranks",
                                    .unit = "us",
                                    .label = kLabel,
                                    .group = "name",
                                    .min = "min (us)",
                                    .p25 = "25%",
                                    .median = "50%",
                                    .p75 = "75%",
                                    .max = "max (us)"}};

}  // namespace

const ReportEntry& kernel_dist_report_row() {
  static const ReportEntry row{
      .kind = {.name = "kernel-dist",
               .hta = "get_gpu_kernel_breakdown's per-kernel charts",
               .summary = "the top kernels of each type: per rank, the count, total and spread of "
                          "their durations",
               .options = kOptions},
      .order = 40,
      .run = one_table<kernel_duration_distribution>,
      .charts = kCharts};
  return row;
}

}  // namespace opscope::internal

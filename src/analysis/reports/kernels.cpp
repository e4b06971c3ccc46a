// The "kernels" report: HTA's get_gpu_kernel_breakdown (hta/analyzers/breakdown_analysis.py),
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
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_gpu_events;
using internal::Interval;
using internal::merged;
using internal::Stats;
using internal::stats_of;
using internal::us;

}  // namespace

std::vector<Report> gpu_kernel_breakdown(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks, const ReportOptions& options) {
  const double duration_ratio = options.duration_ratio;
  const std::size_t num_kernels = options.num_kernels;
  static constexpr std::string_view kTypes[] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
  // kernel_type: label -> whole microseconds over all ranks, labels in first-seen order.
  std::vector<std::pair<std::string, std::int64_t>> by_label;
  Report kernels;
  kernels.name = "kernels";
  kernels.columns = {"name",   "sum (us)",  "max (us)",    "min (us)",
                     "stddev", "mean (us)", "kernel_type", "rank"};
  struct KernelRow {
    std::string name;
    Stats stats;
    std::string_view type;
    std::int64_t rank;
  };
  std::vector<KernelRow> kernel_rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    std::vector<Interval> of_type[3];
    std::vector<std::vector<std::pair<std::string_view, double>>> durations(3);
    internal::KernelTypes kernel_type;
    for (const std::int32_t index : analyzed_gpu_events(r, internal::drop_last_step(r, options))) {
      const Event& e = r.events()[static_cast<std::size_t>(index)];
      const std::string_view type = kernel_type(e.name);
      for (int t = 0; t < 3; ++t) {
        if (type != kTypes[t]) continue;
        of_type[t].push_back({e.start_ns, e.end_ns});
        durations[static_cast<std::size_t>(t)].emplace_back(e.name, us(e.end_ns - e.start_ns));
      }
    }
    // The sweep: each type's union contributes +bit at its starts and -bit at its ends; ends
    // go first at equal times, so that no zero-length piece is labelled.
    std::vector<std::pair<std::int64_t, int>> edges;
    for (int t = 0; t < 3; ++t) {
      for (const Interval& x : merged(std::move(of_type[t]))) {
        edges.emplace_back(x.start, 1 << t);
        edges.emplace_back(x.end, -(1 << t));
      }
    }
    std::sort(edges.begin(), edges.end());  // -bit before +bit at the same time
    int running = 0;
    for (std::size_t k = 0; k + 1 < edges.size(); ++k) {
      running += edges[k].second;
      if (running <= 0) continue;
      std::string label;
      for (int t = 0; t < 3; ++t) {
        if (running & (1 << t)) {
          label += (label.empty() ? "" : " overlapping ") + std::string(kTypes[t]);
        }
      }
      // HTA truncates each piece to whole microseconds (astype(int)).
      const auto piece = static_cast<std::int64_t>(us(edges[k + 1].first - edges[k].first));
      auto it = std::find_if(by_label.begin(), by_label.end(),
                             [&](const auto& p) { return p.first == label; });
      if (it == by_label.end()) {
        by_label.emplace_back(label, piece);
      } else {
        it->second += piece;
      }
    }
    // Per type: each kernel's statistics, the largest totals first, the tail as "others".
    for (int t = 0; t < 3; ++t) {
      std::vector<std::pair<std::string_view, double>>& d = durations[static_cast<std::size_t>(t)];
      std::sort(d.begin(), d.end());
      std::vector<KernelRow> rows;
      for (std::size_t a = 0; a < d.size();) {
        std::size_t b = a;
        std::vector<double> values;
        for (; b < d.size() && d[b].first == d[a].first; ++b) values.push_back(d[b].second);
        rows.push_back({std::string(d[a].first), stats_of(values), kTypes[t], rank});
        a = b;
      }
      std::stable_sort(rows.begin(), rows.end(), [](const KernelRow& x, const KernelRow& y) {
        return x.stats.sum > y.stats.sum;
      });
      if (rows.size() > num_kernels) {
        std::vector<double> cumsum(rows.size());
        double acc = 0;
        for (std::size_t k = 0; k < rows.size(); ++k) cumsum[k] = acc += rows[k].stats.sum;
        // pandas' quantile: linear interpolation at position ratio * (n - 1).
        const double pos = duration_ratio * static_cast<double>(rows.size() - 1);
        const auto lo = static_cast<std::size_t>(pos);
        const std::size_t hi = std::min(lo + 1, rows.size() - 1);
        const double q = cumsum[lo] + (cumsum[hi] - cumsum[lo]) * (pos - static_cast<double>(lo));
        std::vector<KernelRow> kept;
        std::vector<double> others;
        for (std::size_t k = 0; k < rows.size(); ++k) {
          if (cumsum[k] > q || k >= num_kernels) {
            others.push_back(rows[k].stats.sum);
          } else {
            kept.push_back(std::move(rows[k]));
          }
        }
        if (!others.empty()) kept.push_back({"others", stats_of(others), kTypes[t], rank});
        rows = std::move(kept);
      }
      for (KernelRow& row : rows) kernel_rows.push_back(std::move(row));
    }
  }
  std::stable_sort(kernel_rows.begin(), kernel_rows.end(),
                   [](const KernelRow& x, const KernelRow& y) {
                     if (x.type != y.type) return x.type < y.type;
                     if (x.name != y.name) return x.name < y.name;
                     return x.rank < y.rank;
                   });
  for (const KernelRow& k : kernel_rows) {
    kernels.rows.push_back({k.name, k.stats.sum, k.stats.max, k.stats.min, k.stats.stddev,
                            k.stats.mean, std::string(k.type), k.rank});
  }

  Report types;
  types.name = "kernel_type";
  types.columns = {"kernel_type", "sum", "percentage"};
  std::stable_sort(by_label.begin(), by_label.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::int64_t total = 0;
  for (const auto& [label, sum] : by_label) total += sum;
  for (const auto& [label, sum] : by_label) {
    const double pct =
        total > 0
            ? std::round(1000.0 * static_cast<double>(sum) / static_cast<double>(total)) / 10.0
            : std::numeric_limits<double>::quiet_NaN();
    types.rows.push_back({label, sum, pct});
  }
  return {std::move(types), std::move(kernels)};
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"duration_ratio", "num_kernels"};
constexpr ChartLabel kLabel[] = {{"", "kernel_type"}};
constexpr ChartPart kParts[] = {{"share of GPU time", "mediumpurple", "percentage"}};
// GPU time by kernel type (and overlaps of types), over all ranks.
constexpr ReportChart kCharts[] = {{.table = "kernel_type",
                                    .kind = ReportChart::Kind::kStackedBars,
                                    .title = "GPU time by kernel type",
                                    .unit = "%",
                                    .label = kLabel,
                                    .parts = kParts}};
constexpr ReportMethod kMethods[] = {{.name = "get_gpu_kernel_breakdown", .table = "kernel_type"}};

}  // namespace

const ReportEntry& kernels_report_row() {
  static const ReportEntry row{
      .kind = {.name = "kernels",
               .hta = "get_gpu_kernel_breakdown",
               .summary = "GPU time by kernel type over all ranks (kernel_type), and per rank and "
                          "type the top kernels with their statistics, the rest as \"others\" "
                          "(kernels)",
               .options = kOptions,
               .methods = kMethods},
      .order = 30,
      .run = gpu_kernel_breakdown,
      .charts = kCharts};
  return row;
}

}  // namespace opscope::internal

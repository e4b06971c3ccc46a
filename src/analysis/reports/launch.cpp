// The "launch" report: HTA's get_cuda_kernel_launch_stats
// (hta/analyzers/cuda_kernel_analysis.py), declared in opscope/trace_analysis.h;
// tests/unit/analyze_kernel_reports_test.cpp runs HTA beside it on real traces.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_events;
using internal::correlation_of;
using internal::is_launch_call;
using internal::LaunchCalls;
using internal::stream_of;
using internal::us;

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

// pandas' Series.quantile: linear interpolation at position q * (n - 1) of the sorted values.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

std::vector<Report> cuda_kernel_launch_stats(Ranks ranks, const ReportOptions& options) {
  Report launch;
  launch.name = "launch";
  launch.columns = {"rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"};
  Report summary;
  summary.name = "launch_summary";
  summary.columns = {"rank",
                     "launches",
                     "short_kernels",
                     "runtime_outliers",
                     "launch_delay_outliers",
                     "launch_delay_median",
                     "launch_delay_p95"};
  // Rows of all ranks, put in rank order at the end (the traces may come in any order).
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows, summaries;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::vector<Event>& events = r.events();
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    // HTA takes what its trace filter kept (the last profiler step left out, by default).
    const std::vector<std::int32_t> kept = analyzed_events(r, internal::drop_last_step(r, options));
    std::vector<std::int64_t> launched;  // correlation ids of the launch calls, sorted
    for (const std::int32_t k : kept) {
      const Event& e = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, e);
      if (c >= 0 &&
          is_launch_call(e.name, LaunchCalls::kLaunchStats, options.include_memory_events))
        launched.push_back(c);
    }
    std::sort(launched.begin(), launched.end());
    const auto is_launched = [&](std::int64_t c) {
      return std::binary_search(launched.begin(), launched.end(), c);
    };
    // CPU and GPU sides with such an id (HTA: stream -1 and not), each in time order; the
    // rows pair them as pandas' inner merge does, in the CPU side's order.
    std::vector<std::pair<std::int64_t, std::int32_t>> gpu;  // (correlation, event)
    std::vector<std::int32_t> cpu;
    for (const std::int32_t k : kept) {
      const Event& e = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, e);
      if (c < 0 || !is_launched(c)) continue;
      if (stream_of(r, e) < 0) {
        cpu.push_back(k);
      } else {
        gpu.emplace_back(c, k);
      }
    }
    const auto by_start = [&](std::int32_t a, std::int32_t b) {
      const Event& x = events[static_cast<std::size_t>(a)];
      const Event& y = events[static_cast<std::size_t>(b)];
      return std::tie(x.start_ns, a) < std::tie(y.start_ns, b);
    };
    std::stable_sort(cpu.begin(), cpu.end(), by_start);
    std::stable_sort(gpu.begin(), gpu.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : by_start(a.second, b.second);
    });
    std::int64_t short_kernels = 0, runtime_outliers = 0, delay_outliers = 0;
    std::vector<double> delays;
    for (const std::int32_t k : cpu) {
      const Event& call = events[static_cast<std::size_t>(k)];
      const std::int64_t c = correlation_of(r, call);
      auto it = std::lower_bound(gpu.begin(), gpu.end(), std::make_pair(c, std::int32_t{-1}));
      for (; it != gpu.end() && it->first == c; ++it) {
        const Event& work = events[static_cast<std::size_t>(it->second)];
        const double cpu_us = us(call.duration_ns());
        const double gpu_us = us(work.duration_ns());
        // A kernel can start before its launch call returns: HTA clips the delay at 0.
        const double delay = std::max(0.0, us(work.start_ns - call.end_ns));
        rows.emplace_back(rank, internal::make_row(rank, c, cpu_us, gpu_us, delay));
        // The cutoffs pick what HTA's three histograms plot.
        if (cpu_us <= options.runtime_cutoff_us && gpu_us < cpu_us) ++short_kernels;
        if (cpu_us > options.runtime_cutoff_us) ++runtime_outliers;
        if (delay > options.launch_delay_cutoff_us) ++delay_outliers;
        delays.push_back(delay);
      }
    }
    summaries.emplace_back(
        rank, internal::make_row(rank, static_cast<std::int64_t>(delays.size()), short_kernels,
                                 runtime_outliers, delay_outliers, quantile(delays, 0.5),
                                 quantile(delays, 0.95)));
  }
  internal::sort_by_rank(rows);
  internal::sort_by_rank(summaries);
  for (auto& [rank, row] : rows) launch.rows.push_back(std::move(row));
  for (auto& [rank, row] : summaries) summary.rows.push_back(std::move(row));
  return {std::move(summary), std::move(launch)};  // the summary reads first in text
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"runtime_cutoff_us", "launch_delay_cutoff_us",
                                         "include_memory_events"};
constexpr ReportMethod kMethods[] = {{.name = "get_cuda_kernel_launch_stats", .table = "launch"}};

}  // namespace

const ReportEntry& launch_report_row() {
  static const ReportEntry row{
      .kind = {.name = "launch",
               .hta = "get_cuda_kernel_launch_stats",
               .summary = "per rank: each kernel launch's runtime-call duration, kernel duration "
                          "and launch delay (launch), and the short kernels and outliers among "
                          "them (launch_summary)",
               .options = kOptions,
               .methods = kMethods},
      .order = 60,
      .run = cuda_kernel_launch_stats};
  return row;
}

}  // namespace opscope::internal

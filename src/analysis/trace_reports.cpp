// HTA-class reports over results (opscope/trace_analysis.h). Each report follows the
// definition in Holistic Trace Analysis's sources (../shared/peers/hta, hta/analyzers/), which
// the tests run side by side on real traces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "opscope/key_averages.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_gpu_events;
using internal::Interval;
using internal::length;
using internal::merged;
using internal::overlap_length;
using internal::round2;
using internal::sort_by_rank;
using internal::Stats;
using internal::stats_of;
using internal::stream_of;
using internal::us;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// HTA's CommunicateKernelGroupingPattern: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*).
bool is_comm_kernel(std::string_view n) {
  return starts_with(n, "nccl") || starts_with(n, "hip") || starts_with(n, "hccl") ||
         contains(n, "ncclKernel");
}

// MemoryKernelGroupingPattern: (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma).
bool is_memory_kernel(std::string_view n) {
  if (starts_with(n, "hip")) n.remove_prefix(3);
  return starts_with(n, "Memcpy") || starts_with(n, "Memset") || starts_with(n, "dma");
}

// ComputeKernelGroupingPattern, an inverse match of: (^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|
// (^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|
// (^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution).
// Python's re.match anchors at the start, so ".*X" means "contains X" and "cuda.*LaunchKernel"
// "starts with cuda and contains LaunchKernel after it".
bool is_compute_kernel(std::string_view n) {
  const bool excluded =
      starts_with(n, "nccl") || contains(n, "Memcpy") || contains(n, "Memset") ||
      contains(n, "dma") || contains(n, "Sync") || starts_with(n, "Stream Wait Event") ||
      (starts_with(n, "cuda") && contains(n.substr(4), "LaunchKernel")) ||
      starts_with(n, "runFunction") || starts_with(n, "hip") || starts_with(n, "job_exe") ||
      starts_with(n, "packet") || starts_with(n, "pe_exe") || starts_with(n, "cpum_exe_subgraph") ||
      starts_with(n, "hccl") || starts_with(n, "collective_subgraph_execution");
  return !excluded;
}

}  // namespace

std::int64_t rank_of(const ProfilerResult& r, std::int64_t fallback) {
  return r.rank() >= 0 ? r.rank() : fallback;
}

std::string_view kernel_type(std::string_view name) {
  if (is_comm_kernel(name)) return "COMMUNICATION";
  if (is_memory_kernel(name)) return "MEMORY";
  if (is_compute_kernel(name)) return "COMPUTATION";
  return "OTHER";
}

Report temporal_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                          const ReportOptions& options) {
  Report report;
  report.name = "temporal";
  report.columns = {"rank",
                    "idle_time(us)",
                    "compute_time(us)",
                    "non_compute_time(us)",
                    "kernel_time(us)",
                    "idle_time_pctg",
                    "compute_time_pctg",
                    "non_compute_time_pctg"};
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  const bool drop_last = internal::drop_last_step(ranks, options);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
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
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    rows.push_back({rank,
                    {rank, us(idle), us(compute_time), us(non_compute), us(kernel_time), pct(idle),
                     pct(compute_time), pct(non_compute)}});
  }
  sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

Report comm_comp_overlap(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                         const ReportOptions& options) {
  Report report;
  report.name = "overlap";
  report.columns = {"rank", "comp_comm_overlap_pctg"};
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  const bool drop_last = internal::drop_last_step(ranks, options);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    std::vector<Interval> comm, comp;
    internal::KernelTypes kernel_type;
    for (const std::int32_t index : analyzed_gpu_events(r, drop_last)) {
      const Event& e = r.events()[static_cast<std::size_t>(index)];
      const std::string_view type = kernel_type(e.name);
      if (type == "COMMUNICATION") comm.push_back({e.start_ns, e.end_ns});
      if (type == "COMPUTATION") comp.push_back({e.start_ns, e.end_ns});
    }
    const std::vector<Interval> comm_union = merged(std::move(comm));
    const std::int64_t comm_time = length(comm_union);
    const double pctg =
        comm_time > 0
            ? round2(100.0 *
                     static_cast<double>(overlap_length(comm_union, merged(std::move(comp)))) /
                     static_cast<double>(comm_time))
            : std::numeric_limits<double>::quiet_NaN();
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    rows.push_back({rank, {rank, pctg}});
  }
  sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

Report idle_time_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                           const ReportOptions& options) {
  Report report;
  report.name = "idle";
  report.columns = {"rank", "stream", "idle_category", "idle_time", "idle_time_ratio"};
  const auto delay_ns = static_cast<std::int64_t>(options.consecutive_kernel_delay_us * 1000.0);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  const bool drop_last = internal::drop_last_step(ranks, options);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
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
    const std::int64_t rank = rank_of(r, options.first_position + static_cast<std::int64_t>(i));
    for (std::size_t s = 0; s < work.size();) {
      std::size_t t = s;
      std::int64_t idle[3] = {0, 0, 0};
      bool seen[3] = {false, false, false};
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
        seen[category] = true;
      }
      const std::int64_t total = idle[0] + idle[1] + idle[2];
      static constexpr const char* kNames[] = {"host_wait", "kernel_wait", "other"};
      for (int c = 0; c < 3; ++c) {
        if (!seen[c]) continue;
        const double ratio = total != 0
                                 ? round2(static_cast<double>(idle[c]) / static_cast<double>(total))
                                 : std::numeric_limits<double>::quiet_NaN();
        rows.push_back(
            {rank, {rank, work[s].stream, std::string(kNames[c]), round2(us(idle[c])), ratio}});
      }
      s = t;
    }
  }
  sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

std::vector<Report> gpu_kernel_breakdown(
    std::span<const std::shared_ptr<const ProfilerResult>> ranks, const ReportOptions& options) {
  const double duration_ratio = options.duration_ratio;
  const std::size_t num_kernels = options.num_kernels;
  static constexpr std::string_view kTypes[] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
  const bool drop_last = internal::drop_last_step(ranks, options);
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
    for (const std::int32_t index : analyzed_gpu_events(r, drop_last)) {
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

Report operator_report(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                       const ReportOptions& options) {
  Report r;
  r.name = "ops";
  r.columns = {"rank",
               "Name",
               "Self CPU %",
               "Self CPU (us)",
               "CPU total (us)",
               "CPU time avg (us)",
               "Self CUDA (us)",
               "CUDA total (us)",
               "CUDA time avg (us)",
               "CPU Mem (B)",
               "Self CPU Mem (B)",
               "CUDA Mem (B)",
               "Self CUDA Mem (B)",
               "# of Calls"};
  const auto us = [](double ns) { return ns / 1000.0; };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::int64_t rank =
        rank_of(*ranks[i], options.first_position + static_cast<std::int64_t>(i));
    const KeyAverages avg = key_averages(*ranks[i]);
    for (const FunctionEventAvg& row : avg.rows()) {
      r.rows.push_back({rank, row.key, row.self_cpu_percent_total,
                        us(static_cast<double>(row.self_cpu_time_total_ns)),
                        us(static_cast<double>(row.cpu_time_total_ns)), us(row.cpu_time_avg_ns()),
                        us(static_cast<double>(row.self_cuda_time_total_ns)),
                        us(static_cast<double>(row.cuda_time_total_ns)), us(row.cuda_time_avg_ns()),
                        row.cpu_memory_usage, row.self_cpu_memory_usage, row.cuda_memory_usage,
                        row.self_cuda_memory_usage, row.count});
    }
  }
  return r;
}

}  // namespace opscope

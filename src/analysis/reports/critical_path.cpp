// The "critical-path" report: HTA's critical_path_analysis (graph in
// src/analysis/critical_path.cpp) with CPGraph.get_critical_path_breakdown() and summary() as
// tables, per rank.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/report_catalog.h"
#include "opscope/error.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string_view critical_path_edge_type_name(CriticalPathEdgeType type) {
  switch (type) {
    case CriticalPathEdgeType::kOperatorKernel:
      return "critical_path_operator";
    case CriticalPathEdgeType::kDependency:
      return "critical_path_dependency";
    case CriticalPathEdgeType::kKernelLaunchDelay:
      return "critical_path_kernel_launch_delay";
    case CriticalPathEdgeType::kKernelKernelDelay:
      return "critical_path_kernel_kernel_delay";
    case CriticalPathEdgeType::kSyncDependency:
      return "critical_path_sync_dependency";
  }
  return "";
}

// CPGraph.bound_by; is_comm_kernel is CommunicateKernelGroupingPattern.match:
// (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*).
std::string_view critical_path_bound_by(CriticalPathEdgeType type, std::string_view short_name,
                                        std::int64_t stream,
                                        std::span<const std::string> data_load_events) {
  switch (type) {
    case CriticalPathEdgeType::kKernelKernelDelay:
      return "gpu_kernel_kernel_overhead";
    case CriticalPathEdgeType::kKernelLaunchDelay:
      return "gpu_kernel_launch_overhead";
    case CriticalPathEdgeType::kDependency:
    case CriticalPathEdgeType::kSyncDependency:
      return "";
    case CriticalPathEdgeType::kOperatorKernel:
      break;
  }
  if (stream < 0) {
    for (const std::string& p : data_load_events) {
      if (short_name.find(p) != std::string_view::npos) return "data_loading";
    }
    return "cpu_bound";
  }
  if (starts_with(short_name, "nccl") || starts_with(short_name, "hip") ||
      starts_with(short_name, "hccl") || short_name.find("ncclKernel") != std::string_view::npos) {
    return "gpu_communication_bound";
  }
  return "gpu_compute_bound";
}

namespace {

std::vector<Report> critical_path_report(Ranks ranks, const ReportOptions& options) {
  Report summary;
  summary.name = "critical_path_summary";
  summary.columns = {"rank", "bound_by", "duration", "percentage"};
  Report breakdown;
  breakdown.name = "critical_path";
  breakdown.columns = {"rank", "event_idx", "duration", "type",   "s_name",
                       "cat",  "pid",       "tid",      "stream", "bound_by"};
  std::vector<std::pair<std::int64_t, const ProfilerResult*>> by_rank;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    by_rank.emplace_back(rank_of(*ranks[i], options.first_position + static_cast<std::int64_t>(i)),
                         ranks[i].get());
  }
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [rank, r] : by_rank) {
    const CriticalPathGraph g = critical_path_graph(*r, options);
    if (!g.found) {
      throw Error("critical-path: no event of rank " + std::to_string(rank) + " is named like '" +
                  options.annotation + "'");
    }
    if (!g.valid) {
      throw Error("critical-path: rank " + std::to_string(rank) + ": no critical path (" +
                  (g.warnings.empty() ? std::string("empty graph") : g.warnings.back()) + ")");
    }
    std::map<std::string, std::int64_t> by_bound;  // groupby's sorted keys
    std::int64_t total = 0;
    for (const std::int32_t k : g.path_edges) {
      const auto at = static_cast<std::size_t>(k);
      const CriticalPathEdgeType type = g.edge_type[at];
      const std::int64_t ev = g.edge_event[at];
      std::string s_name, cat;
      std::int64_t pid = -1, tid = -1, stream = -1;
      std::vector<ReportCell> row;
      row.reserve(10);
      row.emplace_back(rank);
      if (ev >= 0) {
        const Event& e = r->events()[static_cast<std::size_t>(ev)];
        s_name = shorten_name(e.name);
        cat = std::string(r->category(e));
        const ThreadInfo& t = r->threads()[static_cast<std::size_t>(e.thread)];
        pid = t.pid >= 0 ? t.pid : r->pid();
        tid = static_cast<std::int64_t>(t.tid);
        const EventDetail* d = r->detail(e);
        if (d != nullptr && is_gpu_kind(e.kind)) stream = d->gpu.stream;
        row.emplace_back(ev);
      } else {
        row.emplace_back(std::int64_t{-1});
      }
      const std::string bound(
          critical_path_bound_by(type, s_name, stream, options.data_load_events));
      const std::int64_t w = g.edge_weight_ns[at];
      by_bound[bound] += w;
      total += w;
      row.emplace_back(static_cast<double>(w) / 1000.0);
      row.emplace_back(std::string(critical_path_edge_type_name(type)));
      row.emplace_back(std::move(s_name));
      row.emplace_back(std::move(cat));
      row.emplace_back(pid);
      row.emplace_back(tid);
      row.emplace_back(stream);
      row.emplace_back(bound);
      breakdown.rows.push_back(std::move(row));
    }
    for (const auto& [bound, w] : by_bound) {
      summary.rows.push_back({rank, bound, static_cast<double>(w) / 1000.0,
                              total != 0
                                  ? static_cast<double>(w) * 100.0 / static_cast<double>(total)
                                  : std::numeric_limits<double>::quiet_NaN()});
    }
  }
  return {std::move(summary), std::move(breakdown)};
}

}  // namespace
}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr std::string_view kOptions[] = {"annotation", "instance_start", "instance_end",
                                         "data_load_events", "add_zero_weight_launch_edges"};
constexpr ReportMethod kMethods[] = {{.name = "critical_path_analysis", .table = "critical_path"}};
constexpr ChartLabel kLabel[] = {{.text = "rank ", .column = "rank"}};
constexpr ChartPart kParts[] = {
    {.name = "cpu_bound", .color = "#4e79a7"},
    {.name = "gpu_compute_bound", .color = "#59a14f"},
    {.name = "gpu_communication_bound", .color = "#edc948"},
    {.name = "gpu_kernel_launch_overhead", .color = "#e15759"},
    {.name = "gpu_kernel_kernel_overhead", .color = "#f28e2b"},
    {.name = "data_loading", .color = "#b07aa1"},
    {.name = "", .color = "#bab0ac"},
};
constexpr ReportChart kCharts[] = {{.table = "critical_path_summary",
                                    .title = "Critical path by bound type",
                                    .unit = "%",
                                    .label = kLabel,
                                    .parts = kParts,
                                    .series = "bound_by",
                                    .value = "percentage"}};

}  // namespace

const ReportEntry& critical_path_report_row() {
  static const ReportEntry row{
      .kind = {.name = "critical-path",
               .hta = "critical_path_analysis",
               .summary = "per rank: the critical path of the window (--annotation, --instance) "
                          "through CPU operators, launches, kernels and synchronizations, by "
                          "bound type (critical_path_summary) and edge by edge (critical_path)",
               .reads_cpu_ranges = true,
               .reads_other_args = true,
               .options = kOptions,
               .methods = kMethods},
      .order = 110,
      .run = critical_path_report,
      .charts = kCharts};
  return row;
}

}  // namespace opscope::internal

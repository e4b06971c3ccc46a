// HTA-class reports over results (opscope/trace_analysis.h). Each report follows the
// definition in Holistic Trace Analysis's sources (../shared/peers/hta, hta/analyzers/), which
// the tests run side by side on real traces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

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

// HTA's "stream" column: the stream GPU work and GPU-side waits ("cuda_sync" events) name in
// their args, or -1. A "gpu_user_annotation" spans kernels rather than being work itself and
// has none (as in HTA). CPU ranges are never GPU work, even with a "stream" arg: triton's CPU
// ops carry one, and HTA counts them as kernels, which puts CPU time into kernel time;
// opscope does not follow it there (tests/unit/analyze_test.cpp shows the difference).
std::int64_t stream_of(const ProfilerResult& r, const Event& e) {
  if (e.kind == EventKind::kRange || e.kind == EventKind::kAsyncRange ||
      e.kind == EventKind::kInstant || e.kind == EventKind::kMemory ||
      e.kind == EventKind::kGpuAnnotation) {
    return -1;
  }
  const EventDetail* d = r.detail(e);
  return d != nullptr ? d->gpu.stream : -1;
}

bool is_profiler_step(std::string_view name) {
  // HTA's ProfilerStepGroupingPattern: ^ProfilerStep#(\d+)
  if (!starts_with(name, "ProfilerStep#") || name.size() == 13) return false;
  return name[13] >= '0' && name[13] <= '9';
}

// Whether the analysis leaves out the last profiler step, as HTA does by default: when the
// traces hold at least two distinct ProfilerStep#N names (the last step is often cut short
// by the end of the recording).
bool drop_last_step(std::span<const std::shared_ptr<const ProfilerResult>> ranks) {
  std::vector<std::string_view> steps;
  for (const auto& r : ranks) {
    for (const Event& e : r->events()) {
      if (is_profiler_step(e.name) &&
          std::find(steps.begin(), steps.end(), e.name) == steps.end()) {
        steps.push_back(e.name);
        if (steps.size() >= 2) return true;
      }
    }
  }
  return false;
}

// The GPU work of a rank the reports look at: events with a stream (stream_of), minus, when
// `drop_last`, what was not launched before the last profiler step began. HTA keeps a GPU
// event when its correlation id is on a CPU-side event (a runtime call) that started before
// the last ProfilerStep#N; without any ProfilerStep on the rank, it keeps none.
std::vector<std::int32_t> analyzed_gpu_events(const ProfilerResult& r, bool drop_last) {
  std::vector<std::int32_t> out;
  const std::vector<Event>& events = r.events();
  std::int64_t last_step = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> launched;  // correlations of CPU-side events before it
  if (drop_last) {
    bool any_step = false;
    for (const Event& e : events) {
      if (stream_of(r, e) < 0 && is_profiler_step(e.name)) {
        last_step = std::max(last_step, e.start_ns);
        any_step = true;
      }
    }
    if (!any_step) return out;
    for (const Event& e : events) {
      if (stream_of(r, e) >= 0 || e.start_ns >= last_step) continue;
      // A CPU event without a correlation matches GPU events without one (HTA's inner merge
      // on the column, whose missing value is -1).
      const EventDetail* d = r.detail(e);
      launched.push_back(d != nullptr && d->gpu.correlation >= 0 ? d->gpu.correlation : -1);
    }
    std::sort(launched.begin(), launched.end());
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (stream_of(r, e) < 0) continue;
    if (drop_last) {
      const EventDetail* d = r.detail(e);
      const std::int64_t corr = d != nullptr ? d->gpu.correlation : -1;
      if (!std::binary_search(launched.begin(), launched.end(), corr)) continue;
    }
    out.push_back(static_cast<std::int32_t>(i));
  }
  return out;
}

struct Interval {
  std::int64_t start;
  std::int64_t end;
};

// The total length of the union of `v` (HTA's merge_kernel_intervals, then end - ts summed).
// Sorts `v`.
std::int64_t union_length(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < v.size()) {
    std::int64_t start = v[i].start;
    std::int64_t end = v[i].end;
    // HTA starts a new group when ts > the running maximum of the previous ends.
    for (++i; i < v.size() && v[i].start <= end; ++i) end = std::max(end, v[i].end);
    total += end - start;
  }
  return total;
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

double round2(double x) { return std::round(x * 100.0) / 100.0; }

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

Report temporal_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks) {
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
  const bool drop_last = drop_last_step(ranks);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    std::vector<Interval> all;
    std::vector<Interval> compute;
    for (const std::int32_t index : analyzed_gpu_events(r, drop_last)) {
      const Event& e = r.events()[static_cast<std::size_t>(index)];
      all.push_back({e.start_ns, e.end_ns});
      if (kernel_type(e.name) == "COMPUTATION") compute.push_back({e.start_ns, e.end_ns});
    }
    std::int64_t kernel_time = 0;
    std::int64_t idle = 0;
    if (!all.empty()) {
      const std::int64_t busy = union_length(all);
      std::int64_t last_end = all.front().end;
      for (const Interval& v : all) last_end = std::max(last_end, v.end);
      kernel_time = last_end - all.front().start;
      idle = kernel_time - busy;
    }
    const std::int64_t compute_time = union_length(compute);
    const std::int64_t non_compute = kernel_time - compute_time - idle;
    const auto pct = [&](std::int64_t part) {
      return kernel_time > 0
                 ? round2(100.0 * static_cast<double>(part) / static_cast<double>(kernel_time))
                 : 0.0;
    };
    const std::int64_t rank = rank_of(r, static_cast<std::int64_t>(i));
    rows.push_back({rank,
                    {rank, us(idle), us(compute_time), us(non_compute), us(kernel_time), pct(idle),
                     pct(compute_time), pct(non_compute)}});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

namespace {

// The union of `v` as disjoint intervals in time order (HTA's merge_kernel_intervals).
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& x : v) {
    if (!out.empty() && x.start <= out.back().end) {
      out.back().end = std::max(out.back().end, x.end);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

// The length of the intersection of two sets of disjoint intervals in time order.
std::int64_t overlap_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t lo = std::max(a[i].start, b[j].start);
    const std::int64_t hi = std::min(a[i].end, b[j].end);
    if (hi > lo) total += hi - lo;
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

std::int64_t length(const std::vector<Interval>& v) {
  std::int64_t total = 0;
  for (const Interval& x : v) total += x.end - x.start;
  return total;
}

template <typename Row>
void sort_by_rank(std::vector<std::pair<std::int64_t, Row>>& rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace

Report comm_comp_overlap(std::span<const std::shared_ptr<const ProfilerResult>> ranks) {
  Report report;
  report.name = "overlap";
  report.columns = {"rank", "comp_comm_overlap_pctg"};
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  const bool drop_last = drop_last_step(ranks);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    std::vector<Interval> comm, comp;
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
    const std::int64_t rank = rank_of(r, static_cast<std::int64_t>(i));
    rows.push_back({rank, {rank, pctg}});
  }
  sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
}

Report idle_time_breakdown(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                           double consecutive_kernel_delay_us) {
  Report report;
  report.name = "idle";
  report.columns = {"rank", "stream", "idle_category", "idle_time", "idle_time_ratio"};
  const auto delay_ns = static_cast<std::int64_t>(consecutive_kernel_delay_us * 1000.0);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  const bool drop_last = drop_last_step(ranks);
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
    const std::int64_t rank = rank_of(r, static_cast<std::int64_t>(i));
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

}  // namespace opscope

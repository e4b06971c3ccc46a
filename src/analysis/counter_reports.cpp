// The queue-length and memory-bandwidth counters of Holistic Trace Analysis
// (hta/analyzers/trace_counters.py): their time series (counters.h) and the reports over them
// (opscope/trace_analysis.h). The tests run HTA side by side on real traces
// (tests/unit/analyze_counter_reports_test.cpp).
#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/counters.h"
#include "analysis/gpu_work.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace internal {
namespace {

// TraceSymbolTable.get_runtime_launch_events_mask: the runtime calls that enqueue work on a
// stream (CUDA, the driver API, ROCm, MTIA). Synchronous copies (cudaMemcpy) are not among
// them, so the copies they make never enter a queue.
bool is_launch(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kLaunches = {
      "cudaLaunchKernel",
      "cudaLaunchKernelExC",
      "cuLaunchKernel",
      "cuLaunchKernelEx",
      "cudaMemcpyAsync",
      "cudaMemsetAsync",
      "runFunction - job_prep_and_submit_for_execution",
      "hipLaunchKernel",
      "hipExtModuleLaunchKernel",
      "hipMemcpyAsync",
      "hipMemsetAsync",
      "hipMemcpyWithStream"};
  return std::find(kLaunches.begin(), kLaunches.end(), name) != kLaunches.end();
}

// HTA's get_memory_kernel_type: "Memcpy DtoH (Device -> Pinned)" -> "Memcpy DtoH" (the first
// 11 characters), any memset -> "Memset", other memory work (dma, ...) -> "Memcpy Unknown".
std::string memory_kernel_type(std::string_view name) {
  if (name.substr(0, 6) == "Memset") return "Memset";
  if (name.substr(0, 6) != "Memcpy") return "Memcpy Unknown";
  return std::string(name.substr(0, 11));
}

// The event's "memory bandwidth (GB/s)" arg, which the model keeps among the args it has no
// field for (ProfilerResult::other_args); 0 without one, HTA's default. The reader writes that
// text itself, each key right after "{" or "," and followed by ":" and the value's JSON text,
// so finding the key there is exact (a string value holding the words has its quotes
// escaped) and needs no JSON parser here, below the export layer.
double memory_bandwidth(const ProfilerResult& r, const Event& e) {
  static constexpr std::string_view kKey = "\"memory bandwidth (GB/s)\":";
  const std::string_view args = r.other_args(e);
  for (std::size_t at = args.find(kKey); at != std::string_view::npos;
       at = args.find(kKey, at + 1)) {
    if (at == 0 || (args[at - 1] != '{' && args[at - 1] != ',')) continue;
    const std::string_view value = args.substr(at + kKey.size());
    double v = 0.0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    return ec == std::errc() ? v : 0.0;  // a string or null: not a bandwidth
  }
  return 0.0;
}

// Whether HTA's DataFrame holds the event: a complete event with a category, not the
// profiler's own "Trace" span.
bool in_hta_frame(const ProfilerResult& r, const Event& e) {
  if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory) return false;
  const std::string_view cat = r.category(e);
  return !cat.empty() && cat != "Trace";
}

std::int64_t pid_of(const ProfilerResult& r, const Event& e) {
  return r.pid_of(r.threads()[static_cast<std::size_t>(e.thread)]);
}

std::int64_t tid_of(const ProfilerResult& r, const Event& e) {
  return static_cast<std::int64_t>(r.threads()[static_cast<std::size_t>(e.thread)].tid);
}

}  // namespace

std::vector<QueuePoint> queue_length_series(const ProfilerResult& r, bool drop_last) {
  const std::vector<Event>& events = r.events();
  // HTA links a runtime call to its GPU work (index_correlation) before it filters the last
  // step out, so a launch counts when its work exists anywhere in the rank.
  std::vector<std::int64_t> launched_work;
  for (const Event& e : events) {
    if (stream_of(r, e) >= 0 && correlation_of(r, e) >= 0)
      launched_work.push_back(correlation_of(r, e));
  }
  std::sort(launched_work.begin(), launched_work.end());

  const std::vector<std::int32_t> kept = analyzed_events(r, drop_last);
  // The kept GPU work by correlation, and the kept launches (event indices).
  std::vector<std::pair<std::int64_t, std::int32_t>> work;
  std::vector<std::int32_t> launches;
  for (const std::int32_t i : kept) {
    const Event& e = events[static_cast<std::size_t>(i)];
    const std::int64_t c = correlation_of(r, e);
    if (stream_of(r, e) >= 0) {
      if (c >= 0) work.emplace_back(c, i);
    } else if (c >= 0 && is_launch(e.name) &&
               std::binary_search(launched_work.begin(), launched_work.end(), c)) {
      launches.push_back(i);
    }
  }
  std::stable_sort(work.begin(), work.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  // +1 per launch and GPU work it launched (HTA's left join: a launch whose correlation two
  // pieces of work share counts twice, once on each one's stream), then -1 per such work.
  // HTA concatenates the launches before the work and sorts by time; at equal times the
  // stable sort below keeps that order.
  std::vector<QueuePoint> points;
  std::vector<char> work_seen(work.size(), 0);
  for (const std::int32_t li : launches) {
    const Event& launch = events[static_cast<std::size_t>(li)];
    const std::int64_t c = correlation_of(r, launch);
    auto it = std::lower_bound(work.begin(), work.end(), c,
                               [](const auto& w, std::int64_t v) { return w.first < v; });
    for (; it != work.end() && it->first == c; ++it) {
      const Event& w = events[static_cast<std::size_t>(it->second)];
      points.push_back({launch.start_ns, pid_of(r, w), tid_of(r, w), stream_of(r, w), 1});
      work_seen[static_cast<std::size_t>(it - work.begin())] = 1;
    }
  }
  // The work in event order (HTA's semi-join keeps the frame's order).
  std::vector<std::size_t> seen;
  for (std::size_t k = 0; k < work.size(); ++k) {
    if (work_seen[k] != 0) seen.push_back(k);
  }
  std::sort(seen.begin(), seen.end(),
            [&](std::size_t a, std::size_t b) { return work[a].second < work[b].second; });
  for (const std::size_t k : seen) {
    const Event& w = events[static_cast<std::size_t>(work[k].second)];
    points.push_back({w.start_ns, pid_of(r, w), tid_of(r, w), stream_of(r, w), -1});
  }

  // Per stream (HTA's groupby, ascending), in time order, the running sum.
  std::stable_sort(points.begin(), points.end(), [](const QueuePoint& a, const QueuePoint& b) {
    return a.stream != b.stream ? a.stream < b.stream : a.ts_ns < b.ts_ns;
  });
  for (std::size_t k = 0; k < points.size(); ++k) {
    if (k > 0 && points[k - 1].stream == points[k].stream)
      points[k].queue_length += points[k - 1].queue_length;
  }
  return points;
}

std::vector<BandwidthPoint> memory_bw_series(const ProfilerResult& r, bool drop_last) {
  const std::vector<Event>& events = r.events();
  std::vector<BandwidthPoint> starts;
  std::vector<BandwidthPoint> ends;
  for (const std::int32_t i : analyzed_gpu_events(r, drop_last)) {
    const Event& e = events[static_cast<std::size_t>(i)];
    if (kernel_type(e.name) != "MEMORY") continue;
    const double gbps = memory_bandwidth(r, e);
    // A copy of 0 us ends 1 us later, as in HTA (its issue #20): its +bw and -bw would
    // otherwise meet at one time and could sort the wrong way round.
    const std::int64_t dur = e.end_ns > e.start_ns ? e.end_ns - e.start_ns : 1000;
    std::string kind = memory_kernel_type(e.name);
    starts.push_back({e.start_ns, pid_of(r, e), kind, gbps});
    ends.push_back({e.start_ns + dur, pid_of(r, e), std::move(kind), -gbps});
  }
  // HTA concatenates the starts before the ends, sorts by time and groups by name; at equal
  // times the stable sort keeps starts first.
  std::vector<BandwidthPoint> points = std::move(starts);
  points.insert(points.end(), ends.begin(), ends.end());
  std::stable_sort(points.begin(), points.end(),
                   [](const BandwidthPoint& a, const BandwidthPoint& b) {
                     return a.name != b.name ? a.name < b.name : a.ts_ns < b.ts_ns;
                   });
  for (std::size_t k = 1; k < points.size(); ++k) {
    if (points[k - 1].name == points[k].name) points[k].gbps += points[k - 1].gbps;
  }
  return points;
}

std::int64_t aligned_origin_ns(std::span<const std::shared_ptr<const ProfilerResult>> ranks) {
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : ranks) {
    for (const Event& e : r->events()) {
      if (in_hta_frame(*r, e)) origin = std::min(origin, e.start_ns);
    }
  }
  return origin == std::numeric_limits<std::int64_t>::max() ? 0 : origin;
}

}  // namespace internal

namespace {

using internal::us;
using Ranks = std::span<const std::shared_ptr<const ProfilerResult>>;

std::int64_t rank_at(Ranks ranks, std::size_t i, const ReportOptions& options) {
  return rank_of(*ranks[i], options.first_position + static_cast<std::int64_t>(i));
}

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

// A report whose rows come rank by rank, in rank order: add_rows(result, rank, drop_last, add)
// calls add(row) for each row of one rank.
template <typename AddRows>
Report per_rank_report(std::string name, std::vector<std::string> columns, Ranks ranks,
                       const ReportOptions& options, AddRows&& add_rows) {
  Report report;
  report.name = std::move(name);
  report.columns = std::move(columns);
  const bool drop_last = internal::drop_last_step(ranks, options);
  std::vector<std::pair<std::int64_t, std::vector<ReportCell>>> rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::int64_t rank = rank_at(ranks, i, options);
    add_rows(*ranks[i], rank, drop_last, [&](std::vector<ReportCell> row) {
      rows.push_back({rank, std::move(row)});
    });
  }
  internal::sort_by_rank(rows);
  for (auto& [rank, row] : rows) report.rows.push_back(std::move(row));
  return report;
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

std::vector<Report> counter_series_report(Ranks ranks, const ReportOptions& options) {
  std::vector<Report> out;
  out.push_back(queue_length_time_series(ranks, options));
  out.push_back(memory_bw_time_series(ranks, options));
  return out;
}

}  // namespace opscope

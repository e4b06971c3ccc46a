// The queue-length and memory-bandwidth time series of Holistic Trace Analysis
// (hta/analyzers/trace_counters.py), counters.h: what the "queue" and "counters" reports
// (src/analysis/reports/queue.cpp, counters.cpp) and the trace writer of
// src/export/trace_with_counters.cpp are made of. The tests run HTA side by side on real traces
// (tests/unit/analyze_counter_reports_test.cpp).
#include <algorithm>
#include <charconv>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "analysis/counters.h"
#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "opscope/trace_analysis.h"

namespace opscope::internal {
namespace {

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
// escaped) and needs no JSON parse of every copy's args.
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
    } else if (c >= 0 && is_launch_call(e.name, LaunchCalls::kEnqueue) &&
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

}  // namespace opscope::internal

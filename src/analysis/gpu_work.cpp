// The GPU work of a rank as Holistic Trace Analysis sees it (gpu_work.h), and rank_of()
// (opscope/trace_analysis.h).
#include "analysis/gpu_work.h"

#include <limits>
#include <string>

namespace opscope::internal {

std::int64_t stream_of(const ProfilerResult& r, const Event& e) {
  // A "gpu_user_annotation" spans kernels rather than being work itself and has no stream
  // (as in HTA). CPU ranges are never GPU work, even with a "stream" arg: triton's CPU ops
  // carry one, and HTA counts them as kernels, which puts CPU time into kernel time; opscope
  // does not follow it there (tests/unit/analyze_test.cpp shows the difference).
  if (e.kind == EventKind::kRange || e.kind == EventKind::kAsyncRange ||
      e.kind == EventKind::kInstant || e.kind == EventKind::kMemory ||
      e.kind == EventKind::kGpuAnnotation) {
    return -1;
  }
  const EventDetail* d = r.detail(e);
  return d != nullptr ? d->gpu.stream : -1;
}

std::int64_t correlation_of(const ProfilerResult& r, const Event& e) {
  const EventDetail* d = r.detail(e);
  return d != nullptr ? d->gpu.correlation : -1;
}

}  // namespace opscope::internal

namespace opscope {

std::int64_t rank_of(const ProfilerResult& r, std::int64_t fallback) {
  return r.rank() >= 0 ? r.rank() : fallback;
}

}  // namespace opscope

namespace opscope::internal {

bool has_steps_to_cut(const ProfilerResult& r) {
  std::string_view first;
  for (const Event& e : r.events()) {
    if (!is_profiler_step(e.name)) continue;
    if (first.empty()) {
      first = e.name;
    } else if (e.name != first) {
      return true;
    }
  }
  return false;
}

bool drop_last_step(const ProfilerResult& r, const ReportOptions& options) {
  return options.drop_last_step < 0 ? has_steps_to_cut(r) : options.drop_last_step != 0;
}

namespace {

// The start of the last profiler step on the CPU side, and the correlations of the CPU events
// before it; `any_step` false when the rank has no step (it then keeps nothing, as in HTA).
struct StepCut {
  bool any_step = false;
  std::int64_t last_step = std::numeric_limits<std::int64_t>::min();
  // The correlations (the runtime calls') as a bitmap over [first, first + 64 * bits.size()),
  // where they are dense enough (Kineto numbers its calls in turn); else sorted in `launched`.
  // Sorting them was a fifth of a temporal report's time.
  std::int64_t first = 0;
  std::vector<std::uint64_t> bits;
  std::vector<std::int64_t> launched;
  // Whether some CPU event before the cut has no correlation: it matches the GPU events
  // without one (HTA's inner merge on the column, whose missing value is -1). Kept apart so
  // that the CPU ops, most of the events, are not sorted with the launches.
  bool uncorrelated = false;

  bool launched_before(std::int64_t correlation) const {
    if (correlation < 0) return uncorrelated;
    if (!bits.empty()) {
      if (correlation < first) return false;
      const auto at = static_cast<std::uint64_t>(correlation - first);
      return at / 64 < bits.size() && ((bits[at / 64] >> (at % 64)) & 1u) != 0;
    }
    return std::binary_search(launched.begin(), launched.end(), correlation);
  }
};

StepCut step_cut(const ProfilerResult& r) {
  StepCut cut;
  const std::vector<Event>& events = r.events();
  for (const Event& e : events) {
    if (is_profiler_step(e.name) && stream_of(r, e) < 0) {
      cut.last_step = std::max(cut.last_step, e.start_ns);
      cut.any_step = true;
    }
  }
  if (!cut.any_step) return cut;
  std::int64_t lo = std::numeric_limits<std::int64_t>::max();
  std::int64_t hi = -1;
  for (const Event& e : events) {
    if (e.start_ns >= cut.last_step || stream_of(r, e) >= 0) continue;
    const std::int64_t c = correlation_of(r, e);
    if (c >= 0) {
      cut.launched.push_back(c);
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    } else {
      cut.uncorrelated = true;
    }
  }
  if (cut.launched.empty()) return cut;
  // A bitmap where it takes at most about as much memory as the correlations themselves.
  const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
  if (span / 64 <= cut.launched.size() + 1024) {
    cut.first = lo;
    cut.bits.assign(static_cast<std::size_t>(span / 64 + 1), 0);
    for (const std::int64_t c : cut.launched) {
      const auto at = static_cast<std::uint64_t>(c - lo);
      cut.bits[at / 64] |= std::uint64_t{1} << (at % 64);
    }
    cut.launched = {};
  } else if (!std::is_sorted(cut.launched.begin(), cut.launched.end())) {
    std::sort(cut.launched.begin(), cut.launched.end());
  }
  return cut;
}

}  // namespace

namespace {

// The indices HTA's trace filter keeps (see analyzed_events), of every event or, with
// `gpu_only`, of the GPU work alone: one walk decides both, so neither list is derived from the
// other.
std::vector<std::int32_t> kept_events(const ProfilerResult& r, bool drop_last, bool gpu_only) {
  std::vector<std::int32_t> out;
  const std::vector<Event>& events = r.events();
  StepCut cut;
  if (drop_last) {
    cut = step_cut(r);
    if (!cut.any_step) return out;
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const bool gpu = stream_of(r, e) >= 0;
    if (gpu_only && !gpu) continue;
    if (drop_last) {
      if (!gpu) {
        if (e.start_ns >= cut.last_step) continue;
      } else if (!cut.launched_before(correlation_of(r, e))) {
        continue;
      }
    }
    out.push_back(static_cast<std::int32_t>(i));
  }
  return out;
}

}  // namespace

std::vector<std::int32_t> analyzed_events(const ProfilerResult& r, bool drop_last) {
  return kept_events(r, drop_last, /*gpu_only=*/false);
}

std::vector<std::int32_t> analyzed_gpu_events(const ProfilerResult& r, bool drop_last) {
  return kept_events(r, drop_last, /*gpu_only=*/true);
}

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

// The sums of these two fit an int64: their pieces are disjoint, so they add up to at most the
// span of the times, within 2^63 by the reader's rule (import/trace_times.h).
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

Stats stats_of(const std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  s.max = *std::max_element(v.begin(), v.end());
  s.min = *std::min_element(v.begin(), v.end());
  for (double x : v) s.sum += x;
  s.mean = s.sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return s;
}

Describe describe(std::vector<double> v) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  Describe d;
  d.count = static_cast<double>(v.size());
  if (v.empty()) {
    d.mean = d.std = d.min = d.p25 = d.p50 = d.p75 = d.max = kNaN;
    return d;
  }
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - d.mean) * (x - d.mean);
    d.std = std::sqrt(sq / static_cast<double>(v.size() - 1));
  } else {
    d.std = kNaN;
  }
  const auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  d.min = v.front();
  d.p25 = quantile(0.25);
  d.p50 = quantile(0.5);
  d.p75 = quantile(0.75);
  d.max = v.back();
  return d;
}

}  // namespace opscope::internal

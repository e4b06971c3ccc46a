// The GPU work of a rank as Holistic Trace Analysis sees it, shared by the reports of
// opscope/trace_analysis.h (src/analysis/reports/): which events are GPU work and on
// which stream, which of them an analysis keeps (HTA drops the last profiler step), and the
// interval arithmetic and statistics the reports are made of.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/profiler_step.h"
#include "opscope/result.h"
#include "opscope/trace_analysis.h"
#include "util/wide_sums.h"

namespace opscope::internal {

// HTA's "stream" column: the stream GPU work and GPU-side waits ("cuda_sync" events) name in
// their args, or -1 for everything that happens on a CPU (ranges, runtime calls, ...).
std::int64_t stream_of(const ProfilerResult& r, const Event& e);

// The correlation id of an event (runtime call or GPU work), -1 when it has none.
std::int64_t correlation_of(const ProfilerResult& r, const Event& e);

// Whether `r` holds at least two distinct ProfilerStep#N names (HTA's test for cutting the
// last step, asked of this trace alone).
bool has_steps_to_cut(const ProfilerResult& r);
// Whether the analysis of `r` leaves out its last profiler step, as HTA does by default:
// options.drop_last_step when it is 0 or 1, else has_steps_to_cut(r). Decided per trace, so
// that a rank's numbers do not depend on the other traces read with it (HTA decides over the
// job's symbol table, which for the ranks of one job is the same).
bool drop_last_step(const ProfilerResult& r, const ReportOptions& options);

// The indices (into r.events()) of the GPU work an analysis looks at: events with a stream,
// minus, when `drop_last`, what was not launched before the last profiler step began.
std::vector<std::int32_t> analyzed_gpu_events(const ProfilerResult& r, bool drop_last);

// The indices of the events an analysis keeps, CPU and GPU, as HTA's trace filter does when
// `drop_last`: CPU events that start before the last profiler step, and the GPU work they
// launched; everything when not `drop_last`.
std::vector<std::int32_t> analyzed_events(const ProfilerResult& r, bool drop_last);

// kernel_type() (opscope/trace_analysis.h) of the names of one result's events, each name
// classified once: remembered by where its text lies, since a read trace keeps each distinct
// name once and a rank's thousands of kernels have a few hundred names. A name seen at another
// address is classified again, which only costs time.
class KernelTypes {
 public:
  std::string_view operator()(std::string_view name) {
    const auto [it, added] = seen_.try_emplace(name.data(), name.size(), std::string_view());
    if (added || it->second.first != name.size()) it->second = {name.size(), kernel_type(name)};
    return it->second.second;
  }

 private:
  std::unordered_map<const char*, std::pair<std::size_t, std::string_view>> seen_;
};

struct Interval {
  std::int64_t start;
  std::int64_t end;
};

// The union of `v` as disjoint intervals in time order (HTA's merge_kernel_intervals).
std::vector<Interval> merged(std::vector<Interval> v);

// The length of the intersection of two sets of disjoint intervals in time order.
std::int64_t overlap_length(const std::vector<Interval>& a, const std::vector<Interval>& b);

// The summed length of disjoint intervals.
std::int64_t length(const std::vector<Interval>& v);

inline double us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }
// A sum of times over many events is a WideSum, printed with wide_us() (util/wide_sums.h).

inline double round2(double x) { return std::round(x * 100.0) / 100.0; }

// pandas' agg(["sum", "max", "min", "mean", "std"]): std with ddof 1, 0 for one value.
struct Stats {
  double sum = 0, max = 0, min = 0, mean = 0, stddev = 0;
};
Stats stats_of(const std::vector<double>& v);

// pandas' describe(): count, mean, std (ddof 1; NaN for one value), min, 25%, 50%, 75%, max,
// the quantiles by linear interpolation. Empty input: count 0 and NaN elsewhere.
struct Describe {
  double count = 0, mean = 0, std = 0, min = 0, p25 = 0, p50 = 0, p75 = 0, max = 0;
};
Describe describe(std::vector<double> v);

// Rows keyed by rank, put in rank order (stable: rows of one rank keep their order).
template <typename Row>
void sort_by_rank(std::vector<std::pair<std::int64_t, Row>>& rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace opscope::internal

// The "events" report: the rows of Holistic Trace Analysis's trace DataFrame
// (hta/common/trace.py, Trace.get_trace), one per event its parser keeps, with the columns its
// analyzers read; names and categories are ids into the "symbols" table, as in HTA's frame. The
// Python package builds HTA's Trace-shaped view (TraceAnalysis.t, the symbol table, get_trace) and
// LabeledTrace.extract_ops from it; `opscope analyze --report events --format csv` gives the same
// table to any other tool.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
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
using internal::in_hta_frame;
using internal::Ranks;
using internal::stream_of;

// The earliest start among the events HTA keeps of every rank: HTA aligns all ranks to it
// (Trace.align_and_filter_trace), so a ts of 0 is the job's first event.
std::int64_t job_start(Ranks ranks, const ReportOptions& options) {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : ranks) {
    for (const std::int32_t k : analyzed_events(*r, internal::drop_last_step(*r, options))) {
      const Event& e = r->events()[static_cast<std::size_t>(k)];
      if (in_hta_frame(*r, e)) first = std::min(first, e.start_ns);
    }
  }
  return first == std::numeric_limits<std::int64_t>::max() ? 0 : first;
}

std::vector<Report> trace_events(Ranks ranks, const ReportOptions& options) {
  const std::int64_t start = job_start(ranks, options);
  // HTA's symbol table: one id per distinct name or category over the job, in the order met
  // (the frames hold ids; a million events have a few thousand names).
  std::unordered_map<std::string_view, std::int64_t> ids;
  std::vector<std::string_view> symbols;
  const auto id_of = [&](std::string_view s) {
    const auto [it, added] = ids.try_emplace(s, static_cast<std::int64_t>(symbols.size()));
    if (added) symbols.push_back(s);
    return it->second;
  };
  Report table = internal::per_rank_report(
      "events",
      {"rank", "index", "ts", "dur", "name", "cat", "pid", "tid", "stream", "correlation",
       "index_correlation", "iteration", "parent", "depth"},
      ranks, options, [&](const ProfilerResult& r, std::int64_t rank, bool drop, auto add) {
        const std::vector<Event>& events = r.events();
        const std::vector<std::int64_t> iteration = internal::event_iterations(r);
        // The rows in time order (HTA sorts its frame by ts), each event's row number kept so
        // that a parent names its row.
        std::vector<std::int32_t> kept;
        for (const std::int32_t k : analyzed_events(r, drop)) {
          if (in_hta_frame(r, events[static_cast<std::size_t>(k)])) kept.push_back(k);
        }
        std::stable_sort(kept.begin(), kept.end(), [&](std::int32_t a, std::int32_t b) {
          return events[static_cast<std::size_t>(a)].start_ns <
                 events[static_cast<std::size_t>(b)].start_ns;
        });
        std::vector<std::int64_t> row_of(events.size(), -1);
        for (std::size_t i = 0; i < kept.size(); ++i) {
          row_of[static_cast<std::size_t>(kept[i])] = static_cast<std::int64_t>(i);
        }
        // HTA's index_correlation: the row of the other side of a launch (the GPU work of a
        // runtime call, the call of GPU work), matched by correlation id; -1 without one.
        std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> sides;
        for (std::size_t i = 0; i < kept.size(); ++i) {
          const Event& e = events[static_cast<std::size_t>(kept[i])];
          const std::int64_t c = correlation_of(r, e);
          if (c < 0) continue;
          auto& [cpu, gpu] = sides.try_emplace(c, -1, -1).first->second;
          (stream_of(r, e) >= 0 ? gpu : cpu) = static_cast<std::int64_t>(i);
        }
        for (std::size_t i = 0; i < kept.size(); ++i) {
          const Event& e = events[static_cast<std::size_t>(kept[i])];
          const std::int64_t c = correlation_of(r, e);
          const std::int64_t stream = stream_of(r, e);
          std::int64_t other = -1;
          if (c >= 0) {
            const auto& [cpu, gpu] = sides.at(c);
            other = stream >= 0 ? cpu : gpu;
          }
          // The nearest enclosing range that is a row (a range HTA does not keep is skipped),
          // and how many rows enclose this one.
          std::int64_t parent = -1, depth = 0;
          for (std::int32_t p = e.parent; p >= 0; p = events[static_cast<std::size_t>(p)].parent) {
            const std::int64_t row = row_of[static_cast<std::size_t>(p)];
            if (row < 0) continue;
            if (parent < 0) parent = row;
            ++depth;
          }
          const ThreadInfo& thread = r.threads()[static_cast<std::size_t>(e.thread)];
          add({rank, static_cast<std::int64_t>(i), internal::us(e.start_ns - start),
               internal::us(e.duration_ns()), id_of(e.name), id_of(r.category(e)), r.pid_of(thread),
               static_cast<std::int64_t>(thread.tid), stream, c, other,
               iteration[static_cast<std::size_t>(kept[i])], parent, depth});
        }
      });
  Report names;
  names.name = "symbols";
  names.columns = {"id", "symbol"};
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    names.rows.push_back({static_cast<std::int64_t>(i), std::string(symbols[i])});
  }
  std::vector<Report> out;
  out.push_back(std::move(table));
  out.push_back(std::move(names));
  return out;
}

}  // namespace
}  // namespace opscope

namespace opscope::internal {

const ReportEntry& events_report_row() {
  static const ReportEntry row{
      .kind = {.name = "events",
               .hta = "Trace.get_trace",
               .summary = "per rank: every event of HTA's trace DataFrame (ts from the job's "
                          "first event, dur in us, name and cat as ids of the symbols table, "
                          "pid, tid, stream, correlation, index_correlation, iteration, parent "
                          "row, depth)",
               .reads_cpu_range_args = true,
               .reads_cpu_ranges = true},
      .order = 200,
      .run = trace_events};
  return row;
}

}  // namespace opscope::internal

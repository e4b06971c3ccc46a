// The "cupti-counters" report: Holistic Trace Analysis's get_cupti_counter_data_with_operators
// (hta/analyzers/cupti_counter_analysis.py). A trace recorded in CUPTI's range-profiler mode
// holds, per kernel, a "cuda_profiler_range" event whose args are the performance counters
// ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", ...). Those events carry no
// correlation id, so HTA pairs the i-th of them (by start) with the i-th cudaLaunchKernel call
// (by start), and gives each the CPU operators ("cpu_op" ranges) that enclose that call:
// op_stack (outermost first), top_level_op and bottom_level_op. A rank whose counts of ranges
// and launches differ has no rows (HTA logs an error and leaves the rank out).
//
// Table "cupti_counters": rank, ts (us from the job's first event, as the "events" report),
// dur, name, cat, pid, tid, op_stack (the operator names joined by " | ": a cell is one value;
// the Python method splits it into HTA's list), top_level_op, bottom_level_op, then one
// column per counter the ranges name, in the order first met (an integer column when every
// range gives it an integer, else a float one with NaN where a range lacks it).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/hta_events.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "json/json_reader.h"
#include "opscope/error.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::Ranks;

constexpr std::string_view kRangeCategory = "cuda_profiler_range";

struct Row {
  std::int64_t rank;
  std::vector<ReportCell> cells;                                      // the fixed columns
  std::vector<std::pair<std::string, internal::JsonValue>> counters;  // the args
};

std::vector<Report> cupti_counters(Ranks ranks, const ReportOptions& options) {
  std::int64_t job_start = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : ranks) {
    for (const std::int32_t k :
         internal::analyzed_events(*r, internal::drop_last_step(*r, options))) {
      const Event& e = r->events()[static_cast<std::size_t>(k)];
      if (internal::in_hta_frame(*r, e)) job_start = std::min(job_start, e.start_ns);
    }
  }
  std::vector<Row> rows;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const ProfilerResult& r = *ranks[i];
    const std::vector<Event>& events = r.events();
    const std::int64_t rank = internal::rank_at(ranks, i, options);
    const bool drop_last = internal::drop_last_step(r, options);
    std::vector<std::int32_t> ranges, launches;
    for (const std::int32_t k : internal::analyzed_events(r, drop_last)) {
      const Event& e = events[static_cast<std::size_t>(k)];
      if (!internal::in_hta_frame(r, e)) continue;
      const std::string_view cat = r.category(e);
      if (cat == kRangeCategory) ranges.push_back(k);
      // HTA: s_cat.str.match("cuda_runtime") & s_name.str.match("cudaLaunchKernel"), asked of
      // the call's one name, so that nvcc 13's __cudaLaunchKernel pairs too.
      if (cat.starts_with("cuda_runtime") &&
          internal::canonical_call_name(e.name).starts_with("cudaLaunchKernel"))
        launches.push_back(k);
    }
    if (ranges.empty() || ranges.size() != launches.size()) continue;
    const auto by_start = [&](std::int32_t a, std::int32_t b) {
      return events[static_cast<std::size_t>(a)].start_ns <
             events[static_cast<std::size_t>(b)].start_ns;
    };
    std::stable_sort(ranges.begin(), ranges.end(), by_start);
    std::vector<std::int32_t> ops;  // cpu_op ranges, by start (enclosing ones first)
    for (const std::int32_t k : internal::analyzed_events(r, drop_last)) {
      const Event& e = events[static_cast<std::size_t>(k)];
      if (internal::in_hta_frame(r, e) && r.category(e) == "cpu_op") ops.push_back(k);
    }
    std::stable_sort(ops.begin(), ops.end(), [&](std::int32_t a, std::int32_t b) {
      const Event& x = events[static_cast<std::size_t>(a)];
      const Event& y = events[static_cast<std::size_t>(b)];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
    });
    const auto thread_key = [&](const Event& e) {
      const ThreadInfo& t = r.threads()[static_cast<std::size_t>(e.thread)];
      return std::make_pair(r.pid_of(t), t.tid);
    };
    std::stable_sort(launches.begin(), launches.end(), by_start);
    for (std::size_t j = 0; j < ranges.size(); ++j) {
      const Event& e = events[static_cast<std::size_t>(ranges[j])];
      // The operators enclosing the launch call on its thread, outermost first: HTA's call
      // graph stack. The model does not make runtime calls children of the operators around
      // them, so they are found by time (start <= the call's, end >= its end).
      const Event& call = events[static_cast<std::size_t>(launches[j])];
      const auto key = thread_key(call);
      std::vector<std::string_view> stack;
      for (const std::int32_t o : ops) {
        const Event& op = events[static_cast<std::size_t>(o)];
        if (op.start_ns > call.start_ns) break;
        if (op.end_ns >= call.end_ns && thread_key(op) == key) stack.push_back(op.name);
      }
      std::string joined;
      for (const std::string_view name : stack) {
        if (!joined.empty()) joined += " | ";
        joined += name;
      }
      const ThreadInfo& thread = r.threads()[static_cast<std::size_t>(e.thread)];
      Row row{rank,
              {rank, internal::us(e.start_ns - job_start), internal::us(e.duration_ns()),
               std::string(e.name), std::string(r.category(e)), r.pid_of(thread),
               static_cast<std::int64_t>(thread.tid), std::move(joined),
               std::string(stack.empty() ? std::string_view() : stack.front()),
               std::string(stack.empty() ? std::string_view() : stack.back())},
              {}};
      const std::string_view args = r.other_args(e);
      if (!args.empty()) {
        const internal::JsonValue parsed = internal::parse_json(args);
        for (const auto& [key, value] : parsed.as_object()) {
          if (value.type() == internal::JsonValue::Type::kNumber)
            row.counters.emplace_back(key, value);
        }
      }
      rows.push_back(std::move(row));
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.rank < b.rank; });

  Report report;
  report.name = "cupti_counters";
  report.columns = {"rank", "ts",  "dur",      "name",         "cat",
                    "pid",  "tid", "op_stack", "top_level_op", "bottom_level_op"};
  const std::size_t fixed = report.columns.size();
  // The counters' columns in the order first met, and whether each is integer everywhere.
  std::map<std::string, std::size_t> column_of;
  std::vector<bool> integer;
  for (const Row& row : rows) {
    for (const auto& [key, value] : row.counters) {
      if (column_of.emplace(key, report.columns.size()).second) {
        report.columns.push_back(key);
        integer.push_back(true);
      }
      if (!value.is_integer()) integer[column_of[key] - fixed] = false;
    }
  }
  for (const Row& row : rows) {
    if (row.counters.size() != column_of.size()) {
      std::fill(integer.begin(), integer.end(), false);  // a missing value needs NaN
      break;
    }
  }
  for (Row& row : rows) {
    std::vector<ReportCell> cells = std::move(row.cells);
    cells.resize(report.columns.size(), std::numeric_limits<double>::quiet_NaN());
    for (const auto& [key, value] : row.counters) {
      const std::size_t c = column_of[key];
      if (integer[c - fixed]) {
        cells[c] = value.as_int();
      } else {
        cells[c] = value.as_double();
      }
    }
    report.rows.push_back(std::move(cells));
  }
  std::vector<Report> out;
  out.push_back(std::move(report));
  return out;
}

}  // namespace
}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_cupti_counter_data_with_operators", .table = "cupti_counters"}};

}  // namespace

const ReportEntry& cupti_counters_report_row() {
  static const ReportEntry row{
      .kind = {.name = "cupti-counters",
               .hta = "get_cupti_counter_data_with_operators",
               .summary = "per rank: each kernel's CUPTI performance counters (cuda_profiler_range "
                          "events) with the CPU operators that launched it",
               .reads_cpu_ranges = true,
               .reads_other_args = true,
               .methods = kMethods},
      .order = 130,
      .run = cupti_counters};
  return row;
}

}  // namespace opscope::internal

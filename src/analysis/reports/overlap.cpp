// The "overlap" report: HTA's get_comm_comp_overlap (hta/analyzers/communication_analysis.py),
// declared in opscope/trace_analysis.h; tests/unit/analyze_golden_test.cpp compares it with HTA's
// own answers on real traces.
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/gpu_work.h"
#include "analysis/report_catalog.h"
#include "analysis/report_rows.h"
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::analyzed_gpu_events;
using internal::Interval;
using internal::length;
using internal::merged;
using internal::overlap_length;
using internal::per_rank_report;
using internal::round2;

}  // namespace

Report comm_comp_overlap(std::span<const std::shared_ptr<const ProfilerResult>> ranks,
                         const ReportOptions& options) {
  return per_rank_report(
      "overlap", {"rank", "comp_comm_overlap_pctg"}, ranks, options,
      [](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
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
        add({rank, pctg});
      });
}

}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_comm_comp_overlap",
     .table = "overlap",
     .form = ReportMethod::Form::kJobTable,
     .doc = "Per rank: the share of communication-kernel time during which computation kernels\n"
            "ran too, in percent."}};

}  // namespace

const ReportEntry& overlap_report_row() {
  static const ReportEntry row{
      .kind = {.name = "overlap",
               .hta = "get_comm_comp_overlap",
               .summary = "per rank: the share of communication-kernel time that computation "
                          "overlapped",
               .methods = kMethods},
      .order = 50,
      .run = one_table<comm_comp_overlap>};
  return row;
}

}  // namespace opscope::internal

// The "annotations" report: the statistics under Holistic Trace Analysis's
// get_gpu_user_annotation_breakdown (hta/analyzers/breakdown_analysis.py): per rank, category
// (gpu_user_annotation: the annotation's span on the GPU; user_annotation: on the CPU) and
// name, the durations' count, sum, max, min, mean and standard deviation. HTA then folds the
// names past num_kernels (or past duration_ratio of the cumulative time, unless an allow-list
// pattern keeps them) into "others"; the Python method does that on this table, where the
// allow-list's patterns are Python regular expressions as in HTA.
#include <cmath>
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
#include "opscope/trace_analysis.h"

namespace opscope {
namespace {

using internal::Ranks;

struct Durations {
  std::vector<double> us;  // in the order met; the sums are taken in it as pandas does
};

Report user_annotations(Ranks ranks, const ReportOptions& options) {
  return internal::per_rank_report(
      "annotations", {"rank", "cat", "name", "count", "sum", "max", "min", "mean", "std"}, ranks,
      options, [](const ProfilerResult& r, std::int64_t rank, bool drop_last, auto add) {
        // (category, name) in sorted order: pandas' groupby("name") sorts the names.
        std::map<std::pair<std::string_view, std::string_view>, Durations> groups;
        for (const std::int32_t k : internal::analyzed_events(r, drop_last)) {
          const Event& e = r.events()[static_cast<std::size_t>(k)];
          if (!internal::in_hta_frame(r, e)) continue;
          const std::string_view cat = r.category(e);
          if (cat != "gpu_user_annotation" && cat != "user_annotation") continue;
          groups[{cat, e.name}].us.push_back(internal::us(e.duration_ns()));
        }
        for (const auto& [key, d] : groups) {
          double sum = 0, max = -std::numeric_limits<double>::infinity();
          double min = std::numeric_limits<double>::infinity();
          for (const double v : d.us) {
            sum += v;
            max = std::max(max, v);
            min = std::min(min, v);
          }
          const auto n = static_cast<double>(d.us.size());
          const double mean = sum / n;
          // pandas' std: ddof 1, NaN for a single value.
          double std = std::numeric_limits<double>::quiet_NaN();
          if (d.us.size() > 1) {
            double ss = 0;
            for (const double v : d.us) ss += (v - mean) * (v - mean);
            std = std::sqrt(ss / (n - 1));
          }
          add({rank, std::string(key.first), std::string(key.second),
               static_cast<std::int64_t>(d.us.size()), sum, max, min, mean, std});
        }
      });
}

}  // namespace
}  // namespace opscope

namespace opscope::internal {
namespace {

constexpr ReportMethod kMethods[] = {
    {.name = "get_gpu_user_annotation_breakdown", .table = "annotations"}};

}  // namespace

const ReportEntry& annotations_report_row() {
  static const ReportEntry row{
      .kind = {.name = "annotations",
               .hta = "get_gpu_user_annotation_breakdown",
               .summary = "per rank: each user annotation's count and total, max, min, mean "
                          "and stddev of its durations, on the GPU (gpu_user_annotation) and "
                          "on the CPU (user_annotation)",
               .reads_cpu_ranges = true,
               .methods = kMethods},
      .order = 110,
      .run = one_table<user_annotations>};
  return row;
}

}  // namespace opscope::internal

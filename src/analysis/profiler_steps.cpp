// profiler_step_names() (opscope/trace_analysis.h): what a caller that analyzes the ranks of a
// job apart needs to make the job-wide drop-last-step decision that drop_last_step(ranks) makes
// when it sees every rank.
#include <algorithm>
#include <string>
#include <vector>

#include "analysis/gpu_work.h"
#include "opscope/trace_analysis.h"

namespace opscope {

std::vector<std::string> profiler_step_names(const ProfilerResult& r) {
  // The same test as internal::drop_last_step(ranks), over every event of the rank, so that
  // "two or more distinct names over the union of the ranks" decides alike both ways.
  std::vector<std::string> names;
  for (const Event& e : r.events()) {
    if (internal::is_profiler_step(e.name)) names.emplace_back(e.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace opscope

// profiler_step_names() (opscope/trace_analysis.h): what a caller needs to make HTA's job-wide
// drop-last-step decision (two or more distinct names over every rank) itself.
#include <algorithm>
#include <string>
#include <vector>

#include "analysis/gpu_work.h"
#include "opscope/trace_analysis.h"

namespace opscope {

std::vector<std::string> profiler_step_names(const ProfilerResult& r) {
  // The same test as internal::has_steps_to_cut(r), over every event of the rank.
  std::vector<std::string> names;
  for (const Event& e : r.events()) {
    if (internal::is_profiler_step(e.name)) names.emplace_back(e.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace opscope

// The public entry points of the lens exporters (opscope/export.h).
#include "export/collapsed_stacks.h"
#include "export/memory_timeline.h"
#include "opscope/export.h"

namespace opscope {

void export_stacks(const ProfilerResult& result, const std::string& path,
                   std::string_view metric) {
  internal::export_collapsed_stacks(result, path, metric);
}

void export_memory_timeline(const ProfilerResult& result, const std::string& path,
                            std::string_view device) {
  internal::export_memory_timeline(result, path, device);
}

}  // namespace opscope

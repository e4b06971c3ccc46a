// Which events HTA holds and what it calls them (hta_events.h), and kernel_type()
// (opscope/trace_analysis.h).
#include "analysis/hta_events.h"

#include <algorithm>
#include <array>

#include "opscope/trace_analysis.h"

namespace opscope::internal {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// HTA's CommunicateKernelGroupingPattern: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*).
bool is_comm_kernel(std::string_view n) {
  return starts_with(n, "nccl") || starts_with(n, "hip") || starts_with(n, "hccl") ||
         contains(n, "ncclKernel");
}

// ComputeKernelGroupingPattern, an inverse match of: (^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|
// (^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|
// (^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution).
// Python's re.match anchors at the start, so ".*X" means "contains X" and "cuda.*LaunchKernel"
// "starts with cuda and contains LaunchKernel after it".
bool is_compute_kernel(std::string_view name) {
  // The launch-call part of the pattern is asked of the call's one name, so that nvcc 13's
  // "__cudaLaunchKernel" is a launch call here too and never a computation.
  const std::string_view n = canonical_call_name(name);
  const bool excluded =
      starts_with(n, "nccl") || contains(n, "Memcpy") || contains(n, "Memset") ||
      contains(n, "dma") || contains(n, "Sync") || starts_with(n, "Stream Wait Event") ||
      (starts_with(n, "cuda") && contains(n.substr(4), "LaunchKernel")) ||
      starts_with(n, "runFunction") || starts_with(n, "hip") || starts_with(n, "job_exe") ||
      starts_with(n, "packet") || starts_with(n, "pe_exe") || starts_with(n, "cpum_exe_subgraph") ||
      starts_with(n, "hccl") || starts_with(n, "collective_subgraph_execution");
  return !excluded;
}

// The launch calls of HTA, in get_runtime_launch_events_mask's order, each with whether it
// launches a copy or set, and whether cuda_kernel_launch_stats looks it up too.
struct LaunchCall {
  std::string_view name;
  bool memory;
  bool in_launch_stats;
};
// The calls HTA does not name but that launch kernels as the ones above do (cooperative ones,
// the legacy cudaLaunch and cuLaunch*) are counted with them: a launch statistic that skipped
// them would undercount. Runtime calls are looked up by the launch statistics, driver calls
// not, as HTA does with cudaLaunchKernel and cuLaunchKernel.
constexpr std::array<LaunchCall, 20> kLaunchCalls = {{
    {"cudaLaunchKernel", false, true},
    {"cudaLaunchKernelExC", false, true},
    {"cudaLaunchCooperativeKernel", false, true},
    {"cudaLaunchCooperativeKernelMultiDevice", false, true},
    {"cudaLaunch", false, true},
    {"cuLaunchKernel", false, false},
    {"cuLaunchKernelEx", false, false},
    {"cuLaunchCooperativeKernel", false, false},
    {"cuLaunchCooperativeKernelMultiDevice", false, false},
    {"cuLaunch", false, false},
    {"cuLaunchGrid", false, false},
    {"cuLaunchGridAsync", false, false},
    {"cudaMemcpyAsync", true, true},
    {"cudaMemsetAsync", true, true},
    {"runFunction - job_prep_and_submit_for_execution", false, true},
    {"hipLaunchKernel", false, false},
    {"hipExtModuleLaunchKernel", false, false},
    {"hipMemcpyAsync", true, false},
    {"hipMemsetAsync", true, false},
    {"hipMemcpyWithStream", true, false},
}};

}  // namespace

bool in_hta_frame(const ProfilerResult& r, const Event& e) {
  if (e.kind == EventKind::kInstant || e.kind == EventKind::kMemory ||
      e.kind == EventKind::kAsyncRange) {
    return false;
  }
  const std::string_view cat = r.category(e);
  return !cat.empty() && cat != "Trace";
}

std::string_view canonical_call_name(std::string_view name) {
  // CUPTI's version suffix: "_v" and the CUDA version it came with, four digits or more, last
  // (a driver call's own "_v2", cuMemcpyHtoD_v2, is part of its name).
  const std::size_t v = name.rfind("_v");
  if (v != std::string_view::npos && v + 6 <= name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(v) + 2, name.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    name = name.substr(0, v);
  }
  for (const std::string_view suffix : {"_ptsz", "_ptds"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      name.remove_suffix(suffix.size());
      break;
    }
  }
  // Only calls of CUDA's own ("__cudaLaunchKernel", "__cuLaunch..."), not any name that
  // begins with "__".
  if (name.starts_with("__cu")) name.remove_prefix(2);
  return name;
}

bool is_kernel_launch_call(std::string_view name) {
  const std::string_view n = canonical_call_name(name);
  const auto it = std::find_if(kLaunchCalls.begin(), kLaunchCalls.end(),
                               [&](const LaunchCall& c) { return c.name == n; });
  return it != kLaunchCalls.end() && !it->memory && starts_with(n, "cu");
}

bool is_launch_call(std::string_view name, LaunchCalls which, bool include_memory) {
  name = canonical_call_name(name);
  const auto it = std::find_if(kLaunchCalls.begin(), kLaunchCalls.end(),
                               [&](const LaunchCall& c) { return c.name == name; });
  if (it == kLaunchCalls.end() || (it->memory && !include_memory)) return false;
  return which == LaunchCalls::kEnqueue || it->in_launch_stats;
}

bool is_memory_kernel(std::string_view n) {
  if (starts_with(n, "hip")) n.remove_prefix(3);
  return starts_with(n, "Memcpy") || starts_with(n, "Memset") || starts_with(n, "dma");
}

}  // namespace opscope::internal

namespace opscope {

std::string_view kernel_type(std::string_view name) {
  if (internal::is_comm_kernel(name)) return "COMMUNICATION";
  if (internal::is_memory_kernel(name)) return "MEMORY";
  if (internal::is_compute_kernel(name)) return "COMPUTATION";
  return "OTHER";
}

}  // namespace opscope

// Which events Holistic Trace Analysis holds and what it calls them, said once for every report
// (src/analysis/reports/) and for trace_diff(): the rule of its parsed DataFrame, the runtime
// calls it counts as launches, and the name patterns that classify GPU kernels. Each follows
// the HTA code it names (../shared/peers/hta).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "opscope/result.h"

namespace opscope::internal {

// Whether HTA's DataFrame of a trace holds the event. Every analyzer reads the frame that
// hta/common/trace_parser.py's _compress_df leaves, whichever way it loads the trace
// (Trace.parse_traces for TraceAnalysis; LabeledTrace in hta/trace_diff.py parses the same
// way, only without aligning or filtering): it drops the rows without "dur" or "cat"
// (dropna) and those of category "Trace" (Kineto's whole-window span). So: complete events
// with a category. Instants, allocation reports, counters and flows have no "dur"; neither
// have async ranges, which a trace holds as "b"/"e" pairs. A category the model has as empty
// is taken as missing (HTA would keep a "cat":"" it was given; the model cannot tell the two
// apart, and Kineto never writes either).
bool in_hta_frame(const ProfilerResult& r, const Event& e);

// The runtime calls HTA counts as launches of GPU work, from one list; each analyzer of HTA
// looks for its own part of it.
enum class LaunchCalls {
  // TraceSymbolTable.get_runtime_launch_events_mask (hta/common/trace_symbol_table.py), which
  // the counters of hta/analyzers/trace_counters.py read: every call that enqueues work on a
  // stream, CUDA's runtime and driver, ROCm's and MTIA's. Synchronous copies (cudaMemcpy) are
  // not among them, so the copies they make never enter a queue.
  kEnqueue,
  // CudaKernelAnalysis.cuda_kernel_launch_stats (hta/analyzers/cuda_kernel_analysis.py): the
  // names it looks up, CUDA's runtime launches and MTIA's (not cuLaunchKernel, which triton
  // uses, nor the hip* calls); its copies and sets only with include_memory_events.
  kLaunchStats,
};
// Whether `name` is one of `which`; `include_memory`: also the calls that launch copies and
// sets. Every spelling of a call counts as the call (canonical_call_name), so nvcc 13's
// "__cudaLaunchKernel" and the per-thread-stream "cudaMemcpyAsync_ptsz" are launches too; HTA,
// which compares exact names, would count neither, and reports no launches for a program
// built with nvcc 13: a gap, not a contract, so opscope counts them.
bool is_launch_call(std::string_view name, LaunchCalls which, bool include_memory = true);

// The one name of a CUDA runtime or driver call, whichever spelling a trace gives it: without
// CUPTI's version suffix ("_v7000"), the per-thread default stream's suffix ("_ptsz", "_ptds")
// and the leading "__" of the runtime's internal entry points (nvcc 13 compiles <<<>>> to
// __cudaLaunchKernel). "__cudaLaunchKernel_ptsz_v13000" -> "cudaLaunchKernel". Names of other
// calls come back as they are. Every place that recognizes a call by name asks this first.
std::string_view canonical_call_name(std::string_view name);

// Whether `name` is a call that launches a kernel on a stream, in any spelling: the runtime's
// cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel(MultiDevice) and legacy
// cudaLaunch; the driver's cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel(MultiDevice)
// and legacy cuLaunch, cuLaunchGrid, cuLaunchGridAsync. Not graph launches (cudaGraphLaunch
// starts many kernels under one correlation) nor host functions (cudaLaunchHostFunc runs no
// kernel).
bool is_kernel_launch_call(std::string_view name);

// HTA's MemoryKernelGroupingPattern (hta/common/types.py), (^(hip)?Memcpy)|(^(hip)?Memset)|
// (^dma). kernel_type() asks it after the communication pattern; shorten_name() alone, so
// that there a "hipMemcpy..." is memory.
bool is_memory_kernel(std::string_view name);

// HTA's "iteration" column, as TraceDiff reads it (src/analysis/trace_diff.cpp): per event of
// `r`, the ProfilerStep#N whose span holds its start (CPU side) or its launcher's (GPU work);
// -1 for none and for the events not in HTA's frame.
std::vector<std::int64_t> event_iterations(const ProfilerResult& r);

}  // namespace opscope::internal

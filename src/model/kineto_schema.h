// The key names of Kineto's trace JSON that opscope both writes (src/export/chrome_trace.cpp) and
// reads back (src/import/kineto_events.cpp, kineto_join.cpp): spelled once, so that the two sides
// cannot drift. Each says where Kineto (libkineto/src/output_json.cpp) or PyTorch
// (torch/csrc/autograd/profiler_kineto.cpp) writes it.
//
// char arrays, not string_views: the reader compares a key with one by its known length in line
// (is() in src/import/text_walker.h), and the writer copies one with its quotes and colon as a
// single piece built at compile time (spliced() below).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace opscope::kineto {

// --- top-level keys (output_json.cpp: handleTraceStart, finalizeTrace) -------------------------
inline constexpr char kSchemaVersion[] = "schemaVersion";
inline constexpr char kDeviceProperties[] = "deviceProperties";  // one object per GPU
inline constexpr char kTraceId[] = "trace_id";  // 32 hex digits naming the trace (torch 2.x)
inline constexpr char kDistributedInfo[] = "distributedInfo";    // {"rank": ..., ...}
inline constexpr char kRank[] = "rank";                          // in distributedInfo
inline constexpr char kTraceEvents[] = "traceEvents";
inline constexpr char kTraceName[] = "traceName";
inline constexpr char kDisplayTimeUnit[] = "displayTimeUnit";
inline constexpr char kBaseTimeNanoseconds[] = "baseTimeNanoseconds";
// opscope's own: what was recorded, and what could not be.
inline constexpr char kOpscope[] = "opscope";
inline constexpr char kOpscopeNotRecorded[] = "opscope_not_recorded";

// --- metadata events ("ph": "M"; output_json.cpp: handleDeviceInfo, handleResourceInfo) -------
inline constexpr char kProcessName[] = "process_name";             // args: {"name": ...}
inline constexpr char kProcessLabels[] = "process_labels";         // args: {"labels": ...}
inline constexpr char kProcessSortIndex[] = "process_sort_index";  // args: {"sort_index": ...}
inline constexpr char kThreadName[] = "thread_name";               // args: {"name": ...}
inline constexpr char kThreadSortIndex[] = "thread_sort_index";    // args: {"sort_index": ...}
inline constexpr char kNameArg[] = "name";
inline constexpr char kLabelsArg[] = "labels";
inline constexpr char kSortIndexArg[] = "sort_index";

// --- args of CPU ops and user annotations (profiler_kineto.cpp: addMetadata of each op) -------
inline constexpr char kExternalId[] = "External id";  // GPU work's too (output_json.cpp)
inline constexpr char kRecordFunctionId[] = "Record function id";
inline constexpr char kSequenceNumber[] = "Sequence number";
inline constexpr char kFwdThreadId[] = "Fwd thread id";

// The args the lenses add to an op (profiler_kineto.cpp: addMetadata with record_shapes,
// with_stack, with_modules, with_flops). The reader has no field for them: it keeps them with
// the args no field holds (ProfilerResult::other_args), and an export writes them back.
inline constexpr char kInputDims[] = "Input Dims";
inline constexpr char kInputType[] = "Input type";
inline constexpr char kInputStrides[] = "Input Strides";
inline constexpr char kConcreteInputs[] = "Concrete Inputs";
inline constexpr char kFlops[] = "flops";
inline constexpr char kModuleHierarchy[] = "Module Hierarchy";
inline constexpr char kCallStack[] = "Call stack";

// --- args of GPU work and runtime calls (output_json.cpp: handleGpuActivity, handleActivity) --
inline constexpr char kDevice[] = "device";
inline constexpr char kStream[] = "stream";
inline constexpr char kCorrelation[] = "correlation";
inline constexpr char kGrid[] = "grid";
inline constexpr char kBlock[] = "block";
inline constexpr char kRegistersPerThread[] = "registers per thread";
inline constexpr char kSharedMemory[] = "shared memory";
inline constexpr char kBytes[] = "bytes";

// --- args of a "[memory]" instant (profiler_kineto.cpp: reportMemoryUsage) -------------------
inline constexpr char kDeviceType[] = "Device Type";  // c10::DeviceType: CPU 0, CUDA 1, ...
inline constexpr char kDeviceId[] = "Device Id";
inline constexpr char kAddr[] = "Addr";
inline constexpr char kMemoryBytes[] = "Bytes";  // negative on free
inline constexpr char kTotalAllocated[] = "Total Allocated";
inline constexpr char kTotalReserved[] = "Total Reserved";
// opscope's own: "version" marks an in-place write, not an allocation.
inline constexpr char kOpscopeAction[] = "opscope action";

// `before` + `key` + `after` as one NUL-terminated array, made at compile time: a writer that
// copies ,"args":{"External id": in one piece keeps the key spelled here.
template <std::size_t B, std::size_t K, std::size_t A>
constexpr std::array<char, B + K + A - 2> spliced(const char (&before)[B], const char (&key)[K],
                                                  const char (&after)[A]) {
  std::array<char, B + K + A - 2> out{};
  std::size_t at = 0;
  for (std::size_t i = 0; i + 1 < B; ++i) out[at++] = before[i];
  for (std::size_t i = 0; i + 1 < K; ++i) out[at++] = key[i];
  for (std::size_t i = 0; i + 1 < A; ++i) out[at++] = after[i];
  return out;
}
// The text of a spliced() array, without its NUL.
template <std::size_t N>
constexpr std::string_view text_of(const std::array<char, N>& a) {
  return std::string_view(a.data(), N - 1);
}

}  // namespace opscope::kineto

// opscope/types.h: the small value types that recording, results and trace readers share.
//
// What a session records, a range's scope and call site, a device, a memory category and action: what an event in a
// ProfilerResult says about itself. They live here, apart from the headers that record
// (opscope/record_function.h, opscope/memory.h: the hot path, with the collector's inline
// buffers), so that code which only reads results (trace readers, analysis, exporters, a
// program that opens a trace) includes none of the hot path:
//
//   #include "opscope/result.h"   // includes this header, not record_function.h
//   if (event.scope == opscope::RecordScope::kUserScope) { ... }
//
// It is included by the range header on every instrumented file, so it holds declarations
// only and includes no more than <cstdint> and <string_view>.
#pragma once

#include <cstdint>
#include <string_view>

namespace opscope {

// What a session records. Values reach files and sockets: never reuse one.
enum class ActivityType : std::uint8_t {
  kCPU = 0,
  kCUDA = 1,
};

// What kind of code a range covers. The values reach trace files and sockets: never reuse one.
enum class RecordScope : std::uint8_t {
  kFunction = 0,          // an operator ("cpu_op" in traces)
  kBackwardFunction = 1,  // the backward of an operator ("cpu_op")
  kTorchScriptFunction = 2,
  kKernelFunctionDtype = 3,
  kCustomClass = 4,
  kBuildFeature = 5,
  kLiteInterpreter = 6,
  kUserScope = 7,  // a user annotation ("user_annotation" in traces)
  kStaticRuntimeOp = 8,
  kStaticRuntimeModel = 9,
};
inline constexpr int kNumRecordScopes = 10;

// The name of a scope as written in messages ("FUNCTION", "USER_SCOPE", ...).
std::string_view scope_name(RecordScope scope) noexcept;

// A static description of a call site. The macros create one per site at compile time; a
// range then stores only a pointer to it. A site must outlive every result that names it.
struct CallSite {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  // Set by opscope the first time a range of this site is recorded (its index in the
  // process's table of sites, which lets a range's record hold 4 bytes for its name instead of
  // 8); leave it 0. Mutable so that the macros' sites can stay `static constexpr`.
  mutable std::uint32_t compact_index = 0;
};

// Values follow c10::DeviceType for the ones that exist here; they reach trace files
// ("Device Type").
enum class DeviceType : std::int8_t {
  kCPU = 0,
  kCUDA = 1,
};

struct Device {
  DeviceType type = DeviceType::kCPU;
  std::int8_t index = -1;  // -1: the default (CPU has one)

  friend bool operator==(const Device&, const Device&) = default;
};

// What memory is for, as in PyTorch's memory profiler. kUnknown is PyTorch's None category.
// The order is PyTorch's (_CATEGORY_TO_INDEX), which the timeline files use as indices.
enum class MemoryCategory : std::uint8_t {
  kParameter = 0,
  kOptimizerState = 1,
  kInput = 2,
  kTemporary = 3,
  kActivation = 4,
  kGradient = 5,
  kAutogradDetail = 6,
  kUnknown = 7,
};
inline constexpr int kNumMemoryCategories = 8;
// "PARAMETER", "OPTIMIZER_STATE", ..., "UNKNOWN".
std::string_view memory_category_name(MemoryCategory category) noexcept;

// What an allocation report did.
enum class MemoryAction : std::uint8_t {
  kAllocate = 0,  // bytes > 0
  kFree = 1,      // bytes < 0
  kVersion = 2,   // the memory was overwritten in place (report_memory_version)
};

}  // namespace opscope

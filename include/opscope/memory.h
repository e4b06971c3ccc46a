// opscope/memory.h: allocation reporting for the profile_memory lens.
//
// Any allocator reports what it hands out and takes back; opscope records the report when a
// session with profile_memory is recording, and does nothing (one relaxed load) otherwise:
//
//   void* p = pool.allocate(n);
//   opscope::report_memory_usage(p, n, pool.allocated(), pool.reserved());
//   ...
//   pool.free(p);
//   opscope::report_memory_usage(p, -n, pool.allocated(), pool.reserved());
//
// The process's own operator new/delete and malloc/free can be reported without code changes
// by linking the separate hook library `opscope::memhook` (see README).
//
// Each report becomes a "[memory]" instant event on the calling thread, attributed to the
// innermost range open on that thread ("CPU Mem" / "Self CPU Mem" in tables). A category
// (what the memory is for) can be given per report or, for everything a block allocates, with
// a MemoryCategoryScope; the memory timeline (Profiler::export_memory_timeline) stacks bytes by
// category.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "opscope/internal/collector.h"

namespace opscope {

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

// Parses "cpu", "cuda", "cuda:1". Returns nullopt for anything else.
std::optional<Device> parse_device(std::string_view text);
// "cpu", "cuda:0".
std::string device_name(Device device);

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

namespace internal {
void report_memory_slow(const void* ptr, std::int64_t bytes, std::int64_t total_allocated,
                        std::int64_t total_reserved, Device device,
                        std::optional<MemoryCategory> category) noexcept;
void report_memory_version_slow(const void* ptr, std::int64_t bytes, Device device) noexcept;
}  // namespace internal

// True while a session records memory. An allocator may skip computing totals otherwise.
inline bool memory_profiling_enabled() noexcept {
  return (internal::g_lenses.load(std::memory_order_relaxed) & internal::kLensMemory) != 0;
}

// Reports an allocation (bytes > 0) or a free (bytes < 0, the size that was allocated) of
// `ptr`, with the allocator's totals after the change. `category` overrides the calling
// thread's MemoryCategoryScope. Never throws; safe from any thread and from inside allocators.
inline void report_memory_usage(const void* ptr, std::int64_t bytes,
                                std::int64_t total_allocated, std::int64_t total_reserved,
                                Device device = {},
                                std::optional<MemoryCategory> category = std::nullopt) noexcept {
  if (memory_profiling_enabled()) [[unlikely]] {
    internal::report_memory_slow(ptr, bytes, total_allocated, total_reserved, device, category);
  }
}

// Reports that the `bytes` at `ptr` were overwritten in place (PyTorch's INCREMENT_VERSION in
// the raw memory timeline). Optional; allocators that cannot tell simply never call it.
inline void report_memory_version(const void* ptr, std::int64_t bytes,
                                  Device device = {}) noexcept {
  if (memory_profiling_enabled()) [[unlikely]] {
    internal::report_memory_version_slow(ptr, bytes, device);
  }
}

// Sets the category of the memory the calling thread reports while the scope lives (unless a
// report names its own). Scopes nest; the innermost wins.
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory category) noexcept;
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  std::uint8_t previous_;
};

}  // namespace opscope

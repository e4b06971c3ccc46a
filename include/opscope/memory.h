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
#include "opscope/types.h"

namespace opscope {

// Parses "cpu", "cuda", "cuda:1". Returns nullopt for anything else.
std::optional<Device> parse_device(std::string_view text);
// "cpu", "cuda:0".
std::string device_name(Device device);

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

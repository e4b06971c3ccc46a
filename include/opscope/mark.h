// opscope/mark.h: instant events.
//
// A mark is a point in time with a name, shown as an instant in traces ("ph": "i") and as a
// Mark in the legacy profiler's event lists:
//
//   opscope::mark("checkpoint_saved");
//
// It is recorded on the calling thread when a session records that thread, like a range;
// otherwise it costs one relaxed load and a branch.
#pragma once

#include <string_view>

#include "opscope/internal/collector.h"

namespace opscope {

namespace internal {
[[gnu::noinline]] void mark_slow(std::uint32_t state, std::string_view name) noexcept;
}

// Records an instant named `name` (copied) on the calling thread.
inline void mark(std::string_view name) noexcept {
  const std::uint32_t state = internal::g_state.load(std::memory_order_relaxed);
  if (state != 0) [[unlikely]]
    internal::mark_slow(state, name);
}

}  // namespace opscope

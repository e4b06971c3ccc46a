// opscope/internal/clock.h: the timestamp read on the hot path. Not API.
//
// A range stores raw ticks (the TSC on x86-64, the virtual counter on arm64) because reading
// them costs a few nanoseconds where clock_gettime costs 20+; ticks become nanoseconds only at
// export (see src/clock/clock.cpp for the calibration). Where the TSC is not invariant the
// ticks are steady_clock nanoseconds instead, chosen once at start-up.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace opscope::internal {

// True when ticks() reads the hardware counter; false when it reads steady_clock.
// Written once during static initialisation of the library, read-only afterwards.
extern bool g_clock_uses_counter;

inline std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// One hardware counter read, or steady_clock as the fallback. No fence: ranges are far longer
// than the few instructions of reordering a fence would prevent.
inline std::uint64_t ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (g_clock_uses_counter) [[likely]] {
    return __rdtsc();
  }
#elif defined(__aarch64__)
  if (g_clock_uses_counter) [[likely]] {
    std::uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
  }
#endif
  return steady_ns();
}

}  // namespace opscope::internal

// opscope/internal/clock.h: the timestamp read on the hot path. Not API.
//
// A range stores raw ticks (the TSC on x86-64, the virtual counter on arm64) because reading
// them costs a few nanoseconds where clock_gettime costs 20+; ticks become nanoseconds only at
// export (see src/clock/clock.cpp for the calibration). Where the TSC is not invariant the
// ticks are steady_clock nanoseconds instead, chosen once at start-up.
#pragma once

#include <cstdint>

namespace opscope::internal {

// True when ticks() reads the hardware counter; false when it reads steady_clock.
// Chosen once by a constructor that runs before any static initializer without a priority
// (src/clock/clock.cpp), read-only afterwards.
extern bool g_clock_uses_counter;

// steady_clock in nanoseconds (src/clock/clock.cpp): out of line so that this header, which
// every file with a range includes, needs neither <chrono> nor an intrinsics header.
std::uint64_t steady_ns() noexcept;

// One hardware counter read, or steady_clock as the fallback. No fence: ranges are far longer
// than the few instructions of reordering a fence would prevent.
inline std::uint64_t ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (g_clock_uses_counter) [[likely]] {
    return __builtin_ia32_rdtsc();  // __rdtsc() without <x86intrin.h>
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

#include "clock/clock.h"

#include <chrono>
#include <limits>

#include "opscope/internal/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace opscope {
namespace internal {
namespace {

bool detect_invariant_counter() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  // CPUID 0x80000007, EDX bit 8: invariant TSC (constant rate across P-, C- and T-states).
  // Without it TSC deltas do not measure time, so fall back to steady_clock.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000007u) return false;
  __cpuid(0x80000007u, eax, ebx, ecx, edx);
  return (edx & (1u << 8)) != 0;
#elif defined(__aarch64__)
  return true;  // the generic timer's virtual counter is architecturally constant-rate
#else
  return false;
#endif
}

}  // namespace

// Constant-initialised, then chosen by a constructor of the first priority a program may use
// (101): it runs before every static initializer without one, in this library and in a program
// that links it statically, whatever order the linker put the objects in. A plain dynamic
// initializer here ran after on-demand autostart's once the library was compiled in batches
// (CMake links unity objects last batch first), so autostart's thread read ticks of the wrong
// kind before the choice was made.
bool g_clock_uses_counter = false;

namespace {
[[gnu::constructor(101)]] void choose_clock() noexcept {
  g_clock_uses_counter = detect_invariant_counter();
}
}  // namespace

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace internal

namespace clock {

Anchor take_anchor() noexcept {
  // Bracket a steady_clock read between two tick reads and keep the tightest bracket.
  Anchor best;
  std::uint64_t best_width = std::numeric_limits<std::uint64_t>::max();
  for (int i = 0; i < 7; ++i) {
    const std::uint64_t t0 = internal::ticks();
    const auto ns = static_cast<std::int64_t>(internal::steady_ns());
    const std::uint64_t t1 = internal::ticks();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best.ticks = t0 + (t1 - t0) / 2;
      best.steady_ns = ns;
    }
  }
  return best;
}

const Anchor& process_anchor() noexcept {
  static const Anchor anchor = take_anchor();
  return anchor;
}

namespace {
// Take the process anchor while the library loads so that the first session already has a
// long calibration span.
const bool g_anchor_taken = (process_anchor(), true);
}  // namespace

bool uses_hardware_counter() noexcept { return internal::g_clock_uses_counter; }

std::int64_t wall_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TickConverter TickConverter::calibrate(const Anchor& from) noexcept {
  TickConverter c;
  const Anchor now = take_anchor();
  if (internal::g_clock_uses_counter && now.ticks > from.ticks && now.steady_ns > from.steady_ns) {
    c.ns_per_tick_ = static_cast<double>(now.steady_ns - from.steady_ns) /
                     static_cast<double>(now.ticks - from.ticks);
  } else {
    c.ns_per_tick_ = 1.0;  // ticks are steady_clock ns already (or no span to measure)
  }
  // steady → system offset, sampled once per conversion so all events of a window share it.
  const std::int64_t wall = wall_now_ns();
  c.base_ticks_ = now.ticks;
  c.base_wall_ns_ = wall;
  return c;
}

ClockOffset measure_offset(const TickConverter& conv, std::int64_t (*read_ns)(),
                           int tries) noexcept {
  ClockOffset best;
  std::uint64_t narrowest = std::numeric_limits<std::uint64_t>::max();
  for (int i = 0; i < tries; ++i) {
    const std::uint64_t t0 = internal::ticks();
    const std::int64_t other = read_ns();
    const std::uint64_t t1 = internal::ticks();
    if (t1 - t0 >= narrowest) continue;
    narrowest = t1 - t0;
    const std::int64_t before = conv.to_wall_ns(t0);
    const std::int64_t after = conv.to_wall_ns(t1);
    best.offset_ns = before + (after - before) / 2 - other;
    best.error_ns = (after - before + 1) / 2;
  }
  return best;
}

}  // namespace clock
}  // namespace opscope

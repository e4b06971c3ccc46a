// Converting raw ticks (opscope/internal/clock.h) to wall-clock nanoseconds.
//
// The counter frequency is never assumed: it is measured against steady_clock between an
// anchor taken when the library loads (or a session starts) and the moment of conversion, so
// the longer the span, the better the ratio. Each anchor is a (ticks, steady ns) pair read
// back-to-back, keeping the tightest of a few tries so a preemption between the two reads
// does not skew it.
#pragma once

#include <cstdint>

namespace opscope::clock {

struct Anchor {
  std::uint64_t ticks = 0;
  std::int64_t steady_ns = 0;
};

// A (ticks, steady_clock ns) pair read as close together as this machine allows.
Anchor take_anchor() noexcept;

// The anchor taken when the library was loaded.
const Anchor& process_anchor() noexcept;

// True when ticks() reads an invariant hardware counter (constant rate, runs in all
// C-states); false when it falls back to steady_clock.
bool uses_hardware_counter() noexcept;

// Maps ticks to ns since the Unix epoch (system_clock) with one multiply-add.
class TickConverter {
 public:
  // Calibrates from `from` to now; also samples the steady→system offset now.
  static TickConverter calibrate(const Anchor& from) noexcept;
  // The line through (ticks, wall_ns) with slope ns_per_tick: a conversion calibrated in
  // another process (a flight recorder's crash dump).
  static TickConverter through(std::uint64_t ticks, std::int64_t wall_ns,
                               double ns_per_tick) noexcept {
    TickConverter c;
    c.base_ticks_ = ticks;
    c.base_wall_ns_ = wall_ns;
    c.ns_per_tick_ = ns_per_tick > 0 ? ns_per_tick : 1.0;
    return c;
  }

  std::int64_t to_wall_ns(std::uint64_t ticks) const noexcept {
    const double delta = static_cast<double>(static_cast<std::int64_t>(ticks - base_ticks_));
    return base_wall_ns_ + static_cast<std::int64_t>(delta * ns_per_tick_);
  }
  double ns_per_tick() const noexcept { return ns_per_tick_; }

 private:
  std::uint64_t base_ticks_ = 0;
  std::int64_t base_wall_ns_ = 0;
  double ns_per_tick_ = 1.0;
};

// Wall-clock ns since the Unix epoch, now.
std::int64_t wall_now_ns() noexcept;

// What to add to the times of another clock (read by `read_ns`, in ns) to put them on the
// clock of the ranges (`conv` applied to ticks()), such as CUPTI's GPU times, which are
// CLOCK_REALTIME on Linux: the other clock is read between two ticks() reads, `tries` times,
// and the tightest pair kept. error_ns is half that pair's width: how far the reading alone
// may be off (conv's own calibration against steady_clock adds its error).
struct ClockOffset {
  std::int64_t offset_ns = 0;
  std::int64_t error_ns = 0;
};
ClockOffset measure_offset(const TickConverter& conv, std::int64_t (*read_ns)(),
                           int tries = 16) noexcept;

}  // namespace opscope::clock

#include "clock/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "opscope/internal/clock.h"

namespace opscope {
namespace clock_test {

TEST(Clock, TicksAdvance) {
  const std::uint64_t a = internal::ticks();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(internal::ticks(), a);
}

// DESIGN.md: durations converted from ticks agree with steady_clock within 0.1%.
TEST(Clock, ConvertedDurationsMatchSteadyClockWithinOneThousandth) {
  const clock::Anchor from = clock::take_anchor();
  const auto steady0 = std::chrono::steady_clock::now();
  const std::uint64_t t0 = internal::ticks();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::uint64_t t1 = internal::ticks();
  const auto steady1 = std::chrono::steady_clock::now();
  const clock::TickConverter conv = clock::TickConverter::calibrate(from);

  const double measured = static_cast<double>(conv.to_wall_ns(t1) - conv.to_wall_ns(t0));
  const double reference = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(steady1 - steady0).count());
  // The tick pair lies strictly inside the steady pair; allow the few microseconds between the
  // reads on top of the 0.1% budget.
  EXPECT_LE(measured, reference + 1000.0);
  EXPECT_NEAR(measured, reference, reference * 0.001 + 20'000.0);
}

TEST(Clock, WallTimeIsNearSystemClock) {
  const clock::TickConverter conv = clock::TickConverter::calibrate(clock::process_anchor());
  const std::int64_t converted = conv.to_wall_ns(internal::ticks());
  const std::int64_t now = clock::wall_now_ns();
  EXPECT_LT(std::llabs(converted - now), 5'000'000) << "within 5 ms of system_clock";
}

TEST(Clock, ReportsWhichCounterItUses) {
#if defined(__x86_64__)
  // On this project's machines the TSC is invariant; elsewhere the fallback is fine too.
  if (!clock::uses_hardware_counter())
    GTEST_SKIP() << "TSC not invariant here: steady_clock fallback";
  EXPECT_GT(clock::TickConverter::calibrate(clock::process_anchor()).ns_per_tick(), 0.0);
#else
  SUCCEED();
#endif
}

}  // namespace clock_test
}  // namespace opscope

namespace clock_test {
// CUPTI's clock on Linux: CLOCK_REALTIME, which system_clock reads (clock::wall_now_ns).
std::int64_t realtime_ahead_ns() {  // 250 ms ahead
  return opscope::clock::wall_now_ns() + 250'000'000;
}
}  // namespace clock_test

// CUPTI's times are CLOCK_REALTIME: the offset that puts them on the ranges' clock is about
// zero for that clock itself (the ranges' wall time is calibrated to the system clock), and
// follows a clock that runs ahead by as much as it runs ahead; its error is half the narrowest
// read, well under a microsecond on any machine that is not swapping.
TEST(Clock, OffsetOfAnotherClockIsMeasuredWithItsError) {
  const auto conv = opscope::clock::TickConverter::calibrate(opscope::clock::process_anchor());
  const auto same = opscope::clock::measure_offset(conv, opscope::clock::wall_now_ns);
  EXPECT_GE(same.error_ns, 0);
  EXPECT_LT(same.error_ns, 50'000);
  EXPECT_LT(std::abs(same.offset_ns), 2'000'000);  // conv's calibration, not the reading
  const auto ahead = opscope::clock::measure_offset(conv, clock_test::realtime_ahead_ns);
  EXPECT_NEAR(static_cast<double>(ahead.offset_ns - same.offset_ns), -250'000'000.0,
              static_cast<double>(same.error_ns + ahead.error_ns + 100'000));
}

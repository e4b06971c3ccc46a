// Sums over many events of values that one int64 holds but many may not: durations, gaps,
// bytes.
//
// A trace read from a file holds every start and end within ±2^62 ns (the reader's rule,
// src/import/trace_times.h), so the difference of two times, or a single duration, fits an
// int64 without a check. A sum over N events does not: three durations of 2^62 ns pass
// INT64_MAX. Such sums are kept in one of two ways, and each says at its sum which:
//   - WideSum (an __int128: exact for any 2^64 summands of 2^63 each), converted once where
//     the output is a double of microseconds (us(), exact as far as a double is) -- the
//     reports' totals;
//   - saturating_add() where the output is an int64 the API already has (FunctionEventAvg's
//     totals, EventCuda and EventMemory): a sum past the range stays at INT64_MAX (or
//     INT64_MIN), which is 292 years, no trace's real total, rather than wrapping to a number
//     of the wrong sign.
#pragma once

#include <cstdint>
#include <limits>

namespace opscope::internal {

__extension__ typedef __int128 WideSum;  // __extension__: -Wpedantic knows no __int128

// `a + b`, held at the int64 range's ends instead of wrapping.
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) [[unlikely]] {
    return b > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return out;
}

// `a - b`, likewise.
inline std::int64_t saturating_sub(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) [[unlikely]] {
    return b < 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return out;
}

// A wide sum held at the int64 range's ends.
inline std::int64_t saturated(WideSum v) {
  if (v > std::numeric_limits<std::int64_t>::max()) return std::numeric_limits<std::int64_t>::max();
  if (v < std::numeric_limits<std::int64_t>::min()) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}

// Nanoseconds summed wide, as microseconds: the same double as us(std::int64_t) gives for a
// sum that fits (both round the exact integer once).
inline double wide_us(WideSum ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace opscope::internal

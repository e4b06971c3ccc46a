// splitmix64's finaliser: spreads every bit of `x` over all 64, for names made from counters or
// times (temporary files' suffixes, a trace's id) that must differ in their first characters.
#pragma once

#include <cstdint>

namespace opscope::util {

constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace opscope::util

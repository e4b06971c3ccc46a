// Numbers as text without a sign on zero: "-0", "-0.000" or "-0.000us" (a -0.0 double, or a
// tiny negative one rounded away, e.g. a difference of two equal sums of doubles) reads as a
// loss where there is none, so every printed figure goes through here.
#pragma once

#include <string>

namespace opscope::internal {

// Drops the '-' of a formatted number whose digits are all zero; whatever follows the number
// (a unit, '%') is kept. Any other text is left alone.
inline std::string unsigned_zero(std::string s) {
  if (s.size() < 2 || s[0] != '-') return s;
  bool digit = false;
  for (std::size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '0') {
      digit = true;
    } else if (c != '.') {
      if (c >= '1' && c <= '9') return s;
      break;  // the number ends here; a unit or a sign follows
    }
  }
  if (digit) s.erase(0, 1);
  return s;
}

}  // namespace opscope::internal

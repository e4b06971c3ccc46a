// The reader's rule for times (trace_times.h) and the words of its refusals.
#include "import/trace_times.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

#include "import/text_walker.h"

namespace opscope::import {
namespace {

// Whether `t` (without the quotes of a string) is a number, finite or not, that from_chars
// reads whole: "9e21", "1e400" (out of a double's range), "NaN", "Infinity", "-inf". Asked
// only of a time micros_text_to_ns did not take, to tell a number outside the rule from text
// that is no number at all.
bool is_number_text(std::string_view t) {
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  if (t.empty()) return false;
  double v = 0;
  const auto [stop, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return stop == t.data() + t.size() &&
         (ec == std::errc() || ec == std::errc::result_out_of_range);
}

// Nanoseconds as microseconds with their three decimals, exactly ("-12.345").
std::string micros_text(std::int64_t ns) {
  const bool negative = ns < 0;
  // Within the rule's range, |ns| fits; the magnitude as unsigned also for INT64_MIN.
  const std::uint64_t m = negative ? ~static_cast<std::uint64_t>(ns) + 1 : static_cast<std::uint64_t>(ns);
  std::string frac = std::to_string(m % 1000);
  frac.insert(0, 3 - frac.size(), '0');
  return (negative ? "-" : "") + std::to_string(m / 1000) + "." + frac;
}

// The text of a value for a message: at most 40 bytes of it (a hostile one may be long).
std::string shown(std::string_view raw) {
  if (raw.size() <= 40) return std::string(raw);
  return std::string(raw.substr(0, 40)) + "...";
}

const std::string& allowed() {
  static const std::string text =
      "a time must be a finite number of microseconds within +-" + micros_text(kTimeLimitNs) +
      " (2^62 ns, about 146 years either side of 1970), and so must an event's end (ts + dur)";
  return text;
}

}  // namespace

TimeVerdict read_time(std::string_view raw, std::int64_t& ns) {
  if (micros_text_to_ns(raw, ns)) return time_in_range(ns) ? TimeVerdict::kOk : TimeVerdict::kOutOfRange;
  return is_number_text(raw) ? TimeVerdict::kOutOfRange : TimeVerdict::kNotANumber;
}

std::string event_words(const TimePlace& where) {
  std::string out;
  if (where.event_at < 0 && where.event_name.empty()) return out;
  out = " (in the event";
  if (!where.event_name.empty()) out += " \"" + shown(where.event_name) + "\"";
  if (where.event_at >= 0) out += " that starts at byte " + std::to_string(where.event_at);
  return out + ")";
}

std::string time_refusal(std::string_view field, std::string_view raw, const TimePlace& where) {
  std::string out = "\"" + std::string(field) + "\" " + shown(raw);
  if (where.value_at >= 0) out += " at byte " + std::to_string(where.value_at);
  return out + " is outside the times a trace may hold: " + allowed() + event_words(where);
}

std::string end_refusal(std::string_view ts_raw, std::string_view dur_raw, std::int64_t ts_ns,
                        std::int64_t dur_ns, const TimePlace& where) {
  std::string out = "\"ts\" " + shown(ts_raw) + " plus \"dur\" " + shown(dur_raw);
  if (where.value_at >= 0) out += " at byte " + std::to_string(where.value_at);
  // Both are within the rule, so their sum fits an int64.
  out += " ends at " + micros_text(ts_ns + dur_ns) + " us, outside the times a trace may hold: ";
  return out + allowed() + event_words(where);
}

namespace {

// The double nearest to ns / 1000 (what Python's float() reads from the text "ss.nnn"): the
// quotient in a long double of 64 bits of mantissa, then to 53. That double rounding is
// exact here: a quotient of thousandths is never within half a 64-bit ulp of a midpoint of
// the 53-bit grid without being on it (it is 1/1000 of a 53-bit ulp or more away, and
// 2^11 > 1000). Where long double is no wider than double, the text is read by from_chars.
double micros_of(std::int64_t ns) {
  if constexpr (std::numeric_limits<long double>::digits >= 64) {
    return static_cast<double>(static_cast<long double>(ns) / 1000.0L);
  } else {
    std::string text = micros_text(ns);
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
  }
}

std::int64_t ns_of_whole_micros(double us) { return static_cast<std::int64_t>(us) * 1000; }

}  // namespace

std::int64_t hta_ceil_ns(std::int64_t ns) { return ns_of_whole_micros(std::ceil(micros_of(ns))); }

std::int64_t hta_float_ns(std::int64_t ns) {
  const double us = micros_of(ns);
  // The whole microseconds and the fraction apart, each exact: the double's fraction is a
  // multiple of its step, so its thousandths are the nanoseconds it stands for.
  const double whole = std::trunc(us);
  return ns_of_whole_micros(whole) + std::llround((us - whole) * 1000.0);
}

void hta_round_event(std::int64_t& start_ns, std::int64_t& end_ns) {
  const double ts = micros_of(start_ns);
  const double dur = micros_of(end_ns - start_ns);
  start_ns = ns_of_whole_micros(std::ceil(ts));
  end_ns = ns_of_whole_micros(std::floor(ts + dur));
}

}  // namespace opscope::import

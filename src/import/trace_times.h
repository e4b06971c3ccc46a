// The reader's rule for times, the one place it is written (README.md, "Times a trace may
// hold", says it to users):
//
//   A "ts" or "dur" is microseconds written as a JSON number (or a string holding one). It is
//   refused when it is not a finite number, when it is not within ±kTimeLimitNs nanoseconds,
//   or when the event's end (ts + dur) is not.
//
// kTimeLimitNs is 2^62 - 1 ns, about 146 years either side of 1970: far past any clock a trace
// is taken with (Kineto writes microseconds since 1970, 1.7e15 today), and small enough that
// every start and end the model holds is within ±2^62, so the difference or the sum of ANY
// two times fits in an int64. That is what lets the rest of opscope (the model's nesting, the
// reports, the exports) subtract and add two times without checking: a trace's span, a gap, a
// delay, a duration. Only sums over many events (a table's total of durations) can still
// pass INT64_MAX; those say at their sum how they are kept from overflowing.
//
// Every reader of a trace's times goes through read_time() (the Kineto importer for every
// event, the ones a report leaves out too, and `opscope merge`, which copies times as
// written), and words a refusal with time_refusal() / end_refusal(), so `analyze`, `merge`,
// `analyze diff` and the Python API refuse the same file with the same message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::import {

inline constexpr std::int64_t kTimeLimitNs = (std::int64_t{1} << 62) - 1;

constexpr bool time_in_range(std::int64_t ns) { return ns >= -kTimeLimitNs && ns <= kTimeLimitNs; }

enum class TimeVerdict {
  kOk,
  kNotANumber,  // not a number at all ("}", "abc", null): the text is not a time
  kOutOfRange,  // a number, but not finite or not within ±kTimeLimitNs
};

// The rule for one time: `raw` is the value's JSON text as written (a number, or a string
// holding one). kOk sets `ns`.
TimeVerdict read_time(std::string_view raw, std::int64_t& ns);

// The end of a complete event, ts + dur with a negative dur taken as 0 (as the model holds
// it), when both are kOk: within the rule or not. Both are within ±kTimeLimitNs, so the sum
// itself cannot overflow.
constexpr bool end_in_range(std::int64_t ts, std::int64_t dur) {
  return time_in_range(ts + (dur > 0 ? dur : 0));
}

// --- HTA's times (TraceReadOptions::times, TraceTimes) -----------------------------------------
//
// HTA (hta/common/trace_parser.py, round_down_time_stamps) reads the events into a pandas
// frame and, when its "ts" column is float64, rounds every event inward in doubles of
// microseconds: ts = ceil(ts), end = floor(ts + dur), dur = end - ts. The column is float64
// when some ts is written with a fraction or an exponent, or some event has none (NaN); a ts
// written as a string makes it an object column, which HTA leaves alone.

// What one event's ts (its JSON text, empty when it has none) says of the column.
enum class TsColumn : std::uint8_t { kWhole = 0, kFloat = 1, kText = 2 };
inline TsColumn ts_column_of(std::string_view raw) {
  if (raw.empty()) return TsColumn::kFloat;
  if (raw.front() == '"') return TsColumn::kText;
  return raw.find_first_of(".eE") == std::string_view::npos ? TsColumn::kWhole : TsColumn::kFloat;
}

// HTA's ceil(ts) of a time held in nanoseconds, in nanoseconds: the ceiling of the double
// that Python reads from the text (the nearest one to ns / 1000), so a fraction too small for
// the double (below 0.125 us at today's epoch microseconds, 1.7e15) rounds down as in HTA.
std::int64_t hta_ceil_ns(std::int64_t ns);
// HTA's rounding of a complete event [start_ns, end_ns): start = ceil(ts), end =
// floor(ts + dur) with the sum taken in doubles, as pandas takes it. end may fall before start.
void hta_round_event(std::int64_t& start_ns, std::int64_t& end_ns);
// A time as HTA holds it with HTA_DISABLE_NS_ROUNDING=1: the double Python reads from its text,
// in nanoseconds (a multiple of 250 ns at today's epoch microseconds).
std::int64_t hta_float_ns(std::int64_t ns);

// Where a refused time stands, for its message: the byte offset of its value and of its
// event in the (inflated) text, and the event's name when it has one.
struct TimePlace {
  std::int64_t value_at = -1;
  std::int64_t event_at = -1;
  std::string_view event_name;
};

// `field` ("ts" or "dur") written as `raw`, kOutOfRange: what is wrong and what is allowed.
std::string time_refusal(std::string_view field, std::string_view raw, const TimePlace& where);

// An event whose ts (written `ts_raw`) plus dur (`dur_raw`) ends past the rule.
std::string end_refusal(std::string_view ts_raw, std::string_view dur_raw, std::int64_t ts_ns,
                        std::int64_t dur_ns, const TimePlace& where);

// " (in the event "NAME" that starts at byte N)", or less when less is known.
std::string event_words(const TimePlace& where);

}  // namespace opscope::import

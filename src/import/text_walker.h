// Walking the text of a trace (the Kineto importer's pieces and its top-level keys): numbers
// that are times read from their text to the nanosecond, ids written as numbers or strings,
// errors named by the byte or the event where they stand. Inline: every event of a trace goes
// through these, and the reading of a piece (kineto_events.cpp) has them inlined as when they
// were one file.
#pragma once

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "import/json_check.h"
#include "import/trace_text.h"
#include "import/trace_times.h"
#include "json/json_reader.h"

namespace opscope::import {

namespace od = simdjson::ondemand;

// Microseconds written as a JSON number (or a string holding one; the text without the
// whitespace around it) to integer nanoseconds,
// exactly: digits before the point are microseconds, up to three after it nanoseconds.
// The decimal digits from p on (p left at the first other character) into v, which starts at
// 0; false when they do not fit 64 bits. By hand: every event has several numbers, and
// from_chars was a tenth of the reader's instructions. Nineteen digits always fit, so only the
// digits after them are checked.
inline bool read_digits(const char*& p, const char* end, std::uint64_t& v) {
  const char* const unchecked = p + std::min<std::ptrdiff_t>(end - p, 19);
  for (; p != unchecked; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d >= 10) return true;
    v = v * 10 + d;
  }
  for (; p != end; ++p) {
    const auto d = static_cast<unsigned>(*p - '0');
    if (d >= 10) return true;
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  return true;
}

inline bool micros_text_to_ns(std::string_view t, std::int64_t& ns) {
  if (!t.empty() && t.front() == '"') t = t.substr(1, t.size() >= 2 ? t.size() - 2 : 0);
  const char* p = t.data();
  const char* const end = p + t.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  // The digits before the point (or exponent) by hand: every event has two such numbers, and
  // from_chars plus a search for ".eE" cost more than the rest of the number's reading.
  std::uint64_t us = 0;
  const char* const digits = p;
  // Past 64 bits, or past what an int64 of nanoseconds holds.
  if (!read_digits(p, end, us) || us > static_cast<std::uint64_t>(INT64_MAX / 1000 - 1)) {
    return false;
  }
  // An exponent (1e3, 1.5e3): rare; a double is as good as the text then.
  const auto with_exponent = [&] {
    double v = 0;
    const auto [stop, ec] = std::from_chars(digits, end, v);
    if (stop != end) return false;
    if (ec == std::errc::result_out_of_range) {
      // Past a double's range: too small to be a nanosecond (1e-400) is 0; too large is not
      // a time (trace_times.h).
      const std::string_view text(digits, static_cast<std::size_t>(end - digits));
      if (text.find("e-") == std::string_view::npos && text.find("E-") == std::string_view::npos) {
        return false;
      }
      v = 0;
    } else if (ec != std::errc()) {
      return false;
    }
    // Converted only when it fits: a double past INT64_MAX cast to an int64 is undefined
    // behaviour (9e21 us was). The rule's narrower bound is the caller's (read_time).
    const double rounded = v * 1000.0 + 0.5;
    if (!(rounded < 9.2e18)) return false;
    ns = static_cast<std::int64_t>(rounded) * (negative ? -1 : 1);
    return true;
  };
  if (p != end && *p != '.') {
    if (*p != 'e' && *p != 'E') return false;
    return with_exponent();
  }
  std::int64_t frac = 0;
  if (p != end) {  // the point: up to three digits are nanoseconds, the fourth rounds
    ++p;
    if (p == end) return false;
    int n = 0;
    for (; p != end; ++p) {
      const auto d = static_cast<unsigned>(*p - '0');
      if (d >= 10) return (*p == 'e' || *p == 'E') && n > 0 && with_exponent();
      if (n < 3) {
        frac = frac * 10 + d;
      } else if (n == 3 && d >= 5) {
        ++frac;  // rounds to the nearest ns
      }
      ++n;
    }
    for (; n < 3; ++n) frac *= 10;
  } else if (p == digits) {
    return false;  // no digits at all
  }
  ns = (static_cast<std::int64_t>(us) * 1000 + frac) * (negative ? -1 : 1);
  return true;
}

// Whether `text` is the literal `lit`: its length and first byte first, then the rest with a
// comparison of known length that the compiler does in line (string_view's == called memcmp
// for every key of every event's args that had a known key's length: 4 % of a read).
template <std::size_t N>
inline bool is(std::string_view text, const char (&lit)[N]) {
  return text.size() == N - 1 && text[0] == lit[0] && std::memcmp(text.data(), lit, N - 1) == 0;
}

// An id or number that may be written as a string: "tid": "stream 7", "pid": "Spans".
struct Id {
  std::int64_t number = 0;
  std::string text;  // set when the value was not a plain integer
  bool operator<(const Id& o) const {
    return number != o.number ? number < o.number : text < o.text;
  }
  bool operator==(const Id& o) const { return number == o.number && text == o.text; }
};

// Where the text being walked stands in the trace's text, to name the byte of an error: the
// whole text, a piece of its events (from offset_base on), or its top-level keys with the
// events cut out (those after the cut, from split_at on, stood split_shift bytes further).
struct Place {
  std::string_view doc;
  std::int64_t offset_base = 0;
  std::int64_t split_at = INT64_MAX;
  std::int64_t split_shift = 0;
  bool streamed = false;  // doc is not the whole text (a piece, or the keys around the events)
  const char* last_event_at = nullptr;

  std::int64_t offset_of(const char* p) const {
    const auto at = static_cast<std::int64_t>(p - doc.data());
    return offset_base + at + (at >= split_at ? split_shift : 0);
  }
  std::string at_event() const {
    if (last_event_at == nullptr) return "";
    return " (in the event that starts at byte " + std::to_string(offset_of(last_event_at)) + ")";
  }
};

// What walking a text needs whatever it reads: errors named at their place, and the values
// every part of a trace writes the same way (ids, times, raw JSON).
class TextWalker {
 public:
  explicit TextWalker(std::string path) : path_(std::move(path)) {}
  const Place& place() const { return place_; }
  void set_place(const Place& place) { place_ = place; }

 protected:
  void check(simdjson::error_code code, const char* expected) const {
    if (code != simdjson::SUCCESS) [[unlikely]] {
      malformed(code, expected);
    }
  }
  [[noreturn]] void malformed(simdjson::error_code code, const char* expected) const {
    // The strict parser names the exact byte of what simdjson refused, in the place's text (a
    // piece of the events is small, and read again only when it failed).
    if (code == simdjson::MEMALLOC) fail_out_of_memory(path_);  // simdjson's allocation failed
    std::size_t off = 0;
    std::string what;
    if (!place_.doc.empty() && internal::json_error_at(place_.doc, off, what)) {
      fail_json(path_, place_.offset_of(place_.doc.data() + off), -1, what,
                off == place_.doc.size());
    }
    fail_malformed(path_, std::string_view(), code, place_.at_event(), expected);
  }
  // The strict verdict (json_check.h) on `text`, which `parser` has just iterated: the place's
  // text, or a piece of the events (`root_is_events`). Every text a read parses is checked
  // whole, what the read leaves out included, so that the verdict on a file does not depend
  // on what is read of it.
  void check_grammar(od::parser& parser, std::string_view text, bool root_is_events) const {
    JsonFault f;
    if (check_json(parser, text, root_is_events, f)) [[likely]] {
      return;
    }
    fail_json(path_, place_.offset_of(text.data() + f.at),
              f.event_at == SIZE_MAX ? -1 : place_.offset_of(text.data() + f.event_at), f.what,
              f.truncated);
  }
  [[noreturn]] void fail(const std::string& what) const { import::fail(path_, what); }
  std::string at_event() const { return place_.at_event(); }

  // Parses a value's text that lies inside the document, in place: the document's padding
  // lies beyond any of its parts, so no padded copy is needed.
  simdjson::simdjson_result<od::document> iterate_within(od::parser& p, std::string_view text) {
    const char* end = place_.doc.data() + place_.doc.size();
    if (text.data() < place_.doc.data() || text.data() + text.size() > end) {
      fail("internal error: a value outside the document");
    }
    return p.iterate(text.data(), text.size(),
                     static_cast<std::size_t>(end - text.data()) + simdjson::SIMDJSON_PADDING);
  }

  // The JSON text of a value, whatever its type (raw_json_text, trace_text.h).
  std::string_view raw_of(od::value& v, const char* what) {
    std::string_view raw;
    check(raw_json_text(v, raw), what);
    return raw;
  }

  // A scalar's token as written, without the whitespace after it (simdjson's raw token runs
  // to the next one); an object or array gives its first character only.
  static std::string_view token_of(od::value& v) {
    std::string_view raw = v.raw_json_token();
    while (!raw.empty() &&
           (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
      raw.remove_suffix(1);
    }
    return raw;
  }

  // A JSON number or a string of digits as an integer id; anything else keeps its text.
  Id read_id(od::value& v) {
    Id id;
    std::string_view text = token_of(v);
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"' &&
        text.find('\\') == std::string_view::npos) {
      text = text.substr(1, text.size() - 2);  // a string without escapes: its text as it is
    } else if (!text.empty() && text.front() == '"') {
      check(v.get_string().get(text), "a string");
    } else if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
      text = raw_of(v, "an id");
    }
    // An integer, or a string of digits; anything else (a fraction, "stream 7") is text.
    if (!int_of(text, id.number)) id.text = std::string(text);
    return id;
  }

  // A time's value as written (token_of, or an object's or array's whole text), read by the
  // rule (checked_time) once its event is whole, so that its refusal names the event.
  std::string_view time_text(od::value& v, const char* what) {
    std::string_view raw = token_of(v);
    if (!raw.empty() && (raw.front() == '{' || raw.front() == '[')) raw = raw_of(v, what);
    return raw;
  }

  // The time written as `raw` (a view into place().doc) for `field` of the event named `name`,
  // by the rule for times (trace_times.h); refused with the file, the byte, the event and the
  // value as written.
  std::int64_t checked_time(std::string_view raw, const char* field, std::string_view name) const {
    std::int64_t ns = 0;
    // read_time()'s answer for a time within the rule, in line: every event has one or two.
    if (micros_text_to_ns(raw, ns) && time_in_range(ns)) [[likely]] {
      return ns;
    }
    const TimeVerdict verdict = read_time(raw, ns);
    if (verdict == TimeVerdict::kNotANumber) [[unlikely]] {
      fail(std::string("expected a number of microseconds for \"") + field + "\", found " +
           std::string(raw) + at_event());
    }
    if (verdict == TimeVerdict::kOutOfRange) [[unlikely]] {
      fail(time_refusal(field, raw, time_place(raw, name)));
    }
    return ns;
  }

  // Where the value `raw` (a view into place().doc) and its event stand, for a refusal.
  TimePlace time_place(std::string_view raw, std::string_view name) const {
    const std::int64_t event_at =
        place_.last_event_at == nullptr ? -1 : place_.offset_of(place_.last_event_at);
    return {place_.offset_of(raw.data()), event_at, name};
  }

  // An integer written as a JSON number or a string of digits ("12"); false for anything
  // else ("0x0", 1.5, null).
  static bool int_of(std::string_view raw, std::int64_t& out) {
    if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"') {
      raw = raw.substr(1, raw.size() - 2);
    }
    const char* p = raw.data();
    const char* const end = p + raw.size();
    const bool negative = p != end && *p == '-';
    if (negative) ++p;
    if (p == end) return false;
    std::uint64_t v = 0;
    if (!read_digits(p, end, v) || p != end) return false;
    if (negative) {
      if (v > std::uint64_t{1} << 63) return false;
      out = static_cast<std::int64_t>(~v + 1);
    } else {
      out = static_cast<std::int64_t>(v);  // above 2^63: the same 64 bits
    }
    return true;
  }

  std::string path_;
  Place place_;
};

}  // namespace opscope::import

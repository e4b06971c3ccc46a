// The strict verdict on a trace's JSON text (RFC 8259), whatever a read goes on to take of it.
//
// simdjson's On-Demand API checks only what is asked of it: a value the reader skips (the args
// of the CPU ranges `opscope analyze --report temporal` leaves out, an event field no one
// reads) is passed over by counting brackets, and a number is whatever its token says. So
// "ts":.5, "pid":01000, NaN, a missing comma inside args or ",," were accepted by one report
// and refused by another, and merge copied them into its output. check_json() is the one
// check every reader of traces makes on every text it parses (the importer's pieces and the
// top-level keys, merge's and --augment's whole texts), so that the verdict on a file does not
// depend on what is read of it. It walks the index of structural characters that the On-Demand
// parser's stage 1 already built for the text (no second pass over the bytes but a search
// for backslashes): 10-18 % of the CPU time of a `temporal` report on a plain trace, 4 % on a
// .json.gz (bench/RESULTS.md, issue 40).
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope::import {

// Where a text breaks JSON's grammar, and how.
struct JsonFault {
  std::size_t at = 0;  // the byte of the text
  // The byte where the event holding it starts: a value of the top-level "traceEvents" array,
  // or of the root array of a piece of it (`root_is_events`); SIZE_MAX when none does.
  std::size_t event_at = SIZE_MAX;
  std::string what;  // "expected ',' or '}' after an object member", ...
  // The text ended where more was needed: the file was cut short, most likely.
  bool truncated = false;
};

// Checks `text`, which `parser` has just iterated (parser.iterate() succeeded on exactly this
// text, so its stage-1 index is this text's), against JSON's grammar: one value, brackets
// matched in kind, commas and colons where they belong, numbers as the grammar writes them (no
// leading zero, no ".5", no NaN or Infinity, nothing glued to them: a NUL, a control byte or a
// backslash inside a number), the literals true, false and null, escapes in strings; and, when
// the value is an object, no top-level key twice. What stage 1 itself refuses (an unclosed
// string, invalid UTF-8, an unescaped control byte in a string) never reaches here.
// `root_is_events`: the text is a piece of the events array ("[" + events + "]"), whose values
// are events. True when the text is JSON; else false, with `fault` set.
bool check_json(simdjson::ondemand::parser& parser, std::string_view text, bool root_is_events,
                JsonFault& fault);

// Throws Error "cannot read trace PATH: malformed JSON at byte N (in the event that starts at
// byte M): WHAT", or, when `truncated`, "cannot read trace PATH: truncated at byte N (the text
// ends there: was the file cut short?): WHAT". `at` and `event_at` (-1: none) are bytes of
// the trace's (inflated) text. The one wording of a text that is not JSON, in every command.
[[noreturn]] void fail_json(const std::string& path, std::int64_t at, std::int64_t event_at,
                            const std::string& what, bool truncated);

// check_json() over a whole trace text that `parser` has just iterated (offsets are the
// text's own); throws as fail_json() when it is not JSON.
void check_iterated_json(const std::string& path, simdjson::ondemand::parser& parser,
                         std::string_view text);

// check_json() over a whole trace text (padded as simdjson needs), with a parser of its own:
// for merge and --augment, which copy the text they read into their output. Throws as
// fail_json() when it is not JSON.
void check_trace_json(const std::string& path, std::string_view padded_text);

// The nesting check_json() allows, simdjson's own limit.
inline constexpr int kMaxJsonNesting = 1024;

}  // namespace opscope::import

// check_json() (json_check.h): JSON's grammar over the structural index simdjson's stage 1
// built.
#include "import/json_check.h"

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "import/trace_text.h"
#include "json/json_reader.h"
#include "opscope/error.h"

namespace opscope::import {
namespace {

using Parser = simdjson::ondemand::parser;
using Implementation = std::unique_ptr<simdjson::internal::dom_parser_implementation>;
using ImplementationMember = Implementation Parser::*;

// The On-Demand parser keeps the stage-1 index of the text it iterates (the positions of the
// brackets, colons and commas and of the first byte of each string and scalar) in a private
// member, which every On-Demand walk reads. Checking the grammar over that index costs a walk
// over its entries; building one of our own (simdjson's dom_parser_implementation::stage1)
// cost a third of a read again on the largest trace of ../shared/peers. An explicit
// instantiation may name a private member ([temp.spec.general]/6), which is how its address is
// had here: simdjson 3.0's layout is not assumed, only the member's name.
ImplementationMember implementation_member();
template <ImplementationMember M>
struct ExposeImplementation {
  friend ImplementationMember implementation_member() { return M; }
};
template struct ExposeImplementation<&Parser::implementation>;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The fault of a scalar token (from `p` to the end of the token, trailing whitespace trimmed):
// nullptr when it is a number as JSON writes it or true, false, null; else what is wrong, and
// `bad` the byte.
const char* scalar_fault(const char* p, const char* end, const char*& bad) {
  bad = p;
  const char c = *p;
  if (c == 't' || c == 'f' || c == 'n') {
    const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
    if (static_cast<std::size_t>(end - p) == word.size() &&
        std::memcmp(p, word.data(), word.size()) == 0) {
      return nullptr;
    }
    return "expected a value (true, false, null, a number, a string, an object or an array)";
  }
  if (*p == '-') ++p;
  const auto digit = [&] { return p != end && *p >= '0' && *p <= '9'; };
  if (!digit()) {
    bad = p;
    return p == end ? "expected a digit after '-'"
                    : "expected a value (NaN, Infinity and numbers without a digit before the "
                      "point are not JSON)";
  }
  if (*p == '0') {
    ++p;
    if (digit()) {
      bad = p - 1;
      return "a number with a leading zero is not JSON";
    }
  } else {
    while (digit()) ++p;
  }
  if (p != end && *p == '.') {
    ++p;
    if (!digit()) {
      bad = p;
      return "expected a digit after the decimal point";
    }
    while (digit()) ++p;
  }
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p != end && (*p == '+' || *p == '-')) ++p;
    if (!digit()) {
      bad = p;
      return "expected a digit in the exponent";
    }
    while (digit()) ++p;
  }
  if (p != end) {
    bad = p;
    return "unexpected character in a number";
  }
  return nullptr;
}

// Whether [p, end) begins one of the literals true, false, null (a token the text's end cut).
bool is_literal_prefix(const char* p, const char* end) {
  const auto n = static_cast<std::size_t>(end - p);
  for (const std::string_view word : {"true", "false", "null"}) {
    if (n < word.size() && std::memcmp(p, word.data(), n) == 0) return true;
  }
  return false;
}

// The first invalid escape of the text, or SIZE_MAX: backslashes lie only in strings (one
// outside is inside a scalar token, which the grammar refuses), so every backslash found in
// turn starts an escape.
std::size_t bad_escape(std::string_view text, const char*& what) {
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  for (const char* p = begin;;) {
    p = static_cast<const char*>(std::memchr(p, '\\', static_cast<std::size_t>(end - p)));
    if (p == nullptr) return SIZE_MAX;
    const char* const at = p;
    ++p;
    if (p == end) {
      what = "unterminated string";
      return static_cast<std::size_t>(at - begin);
    }
    switch (*p) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        ++p;
        break;
      case 'u':
        ++p;
        for (int i = 0; i < 4; ++i, ++p) {
          const char h = p != end ? *p : '\0';
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) {
            what = "invalid hex digit in \\u escape";
            return static_cast<std::size_t>(at - begin);
          }
        }
        break;
      default:
        what = "invalid escape in string";
        return static_cast<std::size_t>(at - begin);
    }
  }
}

// A top-level key as it reads, its escapes resolved (rare: a key with a backslash).
std::string key_text(std::string_view raw) {
  if (raw.find('\\') == std::string_view::npos) return std::string(raw.substr(1, raw.size() - 2));
  try {
    return internal::parse_json(raw).as_string();
  } catch (const Error&) {
    return std::string(raw);  // a bad escape, which bad_escape() reports at its byte
  }
}

}  // namespace

namespace {

// Where the grammar walk stopped: the token (an index entry) and what was wrong.
struct Stop {
  std::uint32_t token = 0;
  std::size_t at = 0;
  const char* what = nullptr;
  bool truncated = false;
};

// The end of the token at index entry k: the next entry, or the text's end, whitespace
// trimmed.
inline const char* token_end(const char* buf, std::size_t size, const std::uint32_t* at,
                             std::uint32_t n, std::uint32_t k) {
  std::size_t e = k + 1 < n ? at[k + 1] : size;
  while (e > at[k] && is_space(buf[e - 1])) --e;
  return buf + e;
}

// JSON's grammar over the index: true when the text is one value; else false and `stop`.
// One loop over the entries with its state in locals (a first version kept it in a lambda's
// captures and cost half again as much); where an event starts is found only for an error
// (event_start).
bool walk_grammar(const char* buf, std::size_t size, const std::uint32_t* at, std::uint32_t n,
                  Stop& stop) {
  char open[kMaxJsonNesting];
  int depth = 0;
  std::uint32_t i = 0;
  std::unordered_set<std::string> top_keys;  // the root object's keys, to refuse a second one
  bool root_object = false;
  const auto fail = [&](std::size_t byte, const char* why) {
    stop = {i, byte, why, false};
    return false;
  };
  const auto ends = [&](const char* why) {
    stop = {i, size, why, true};
    return false;
  };
value:
  if (i >= n) return ends("the text ends where a value was expected");
  switch (buf[at[i]]) {
    case '"':
      ++i;
      goto after_value;
    case '{':
      if (depth == kMaxJsonNesting) return fail(at[i], "nesting deeper than 1024 levels");
      open[depth++] = '{';
      root_object = root_object || depth == 1;
      if (++i >= n) return ends("the text ends inside an object");
      if (buf[at[i]] == '}') {
        ++i;
        --depth;
        goto after_value;
      }
      goto key;
    case '[':
      if (depth == kMaxJsonNesting) return fail(at[i], "nesting deeper than 1024 levels");
      open[depth++] = '[';
      if (++i >= n) return ends("the text ends inside an array");
      if (buf[at[i]] == ']') {
        ++i;
        --depth;
        goto after_value;
      }
      goto value;
    case ']':
    case '}':
    case ',':
    case ':':
      return fail(at[i], "expected a value");
    default: {
      const char* const end = token_end(buf, size, at, n, i);
      const char* bad = nullptr;
      if (const char* why = scalar_fault(buf + at[i], end, bad)) [[unlikely]] {
        // A token cut off by the end of the text ("tru", "-", "1e") is a truncation.
        if (end == buf + size && (bad == end || is_literal_prefix(buf + at[i], end))) {
          return ends("the text ends inside a value");
        }
        return fail(static_cast<std::size_t>(bad - buf), why);
      }
      ++i;
      goto after_value;
    }
  }
key:
  if (buf[at[i]] != '"') return fail(at[i], "expected a string as object key");
  if (depth == 1 && root_object) [[unlikely]] {
    const char* const end = token_end(buf, size, at, n, i);
    const std::string k = key_text(std::string_view(buf + at[i], end - (buf + at[i])));
    if (!top_keys.insert(k).second) {
      return fail(at[i], k == "traceEvents"
                             ? "a second top-level \"traceEvents\" (a trace has one events "
                               "array; reading both would count every event twice)"
                             : "a top-level key a second time (a trace holds each key once)");
    }
  }
  if (++i >= n) return ends("the text ends inside an object");
  if (buf[at[i]] != ':') return fail(at[i], "expected ':' after an object key");
  ++i;
  goto value;
after_value:
  if (depth == 0) {
    if (i < n) return fail(at[i], "unexpected text after the JSON value");
    return true;
  }
  if (i >= n) {
    return ends(open[depth - 1] == '{' ? "the text ends inside an object"
                                       : "the text ends inside an array");
  }
  {
    const char c = buf[at[i]];
    if (c == ',') {
      if (++i >= n) {
        return ends(open[depth - 1] == '{' ? "the text ends inside an object"
                                           : "the text ends inside an array");
      }
      if (open[depth - 1] == '{') goto key;
      goto value;
    }
    if (c == (open[depth - 1] == '{' ? '}' : ']')) {
      ++i;
      --depth;
      goto after_value;
    }
    return fail(at[i], open[depth - 1] == '{' ? "expected ',' or '}' after an object member"
                                              : "expected ',' or ']' after an array element");
  }
}

// The byte where the event holding index entry `stop` starts, SIZE_MAX when none does: a value
// of the root array of a piece (`root_is_events`), or of the top-level "traceEvents" array.
// Only for an error: a walk of the entries before it, counting brackets.
std::size_t event_start(const char* buf, std::size_t size, const std::uint32_t* at,
                        std::uint32_t n, std::uint32_t stop, bool root_is_events) {
  int depth = 0;
  const int events_depth = root_is_events ? 1 : 2;
  bool in_events = root_is_events;
  bool events_key = false;  // the last top-level key was "traceEvents"
  std::size_t event = SIZE_MAX;
  for (std::uint32_t i = 0; i < n && i <= stop; ++i) {
    const char c = buf[at[i]];
    const bool starts_value =
        i > 0 && (buf[at[i - 1]] == '[' || buf[at[i - 1]] == ',') && c != ']' && c != ',';
    if (in_events && depth == events_depth && starts_value) event = at[i];
    if (c == '{' || c == '[') {
      if (!root_is_events && depth == 1 && c == '[' && events_key) in_events = true;
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      if (depth < events_depth) {
        event = SIZE_MAX;
        if (!root_is_events && depth <= 1) in_events = false;
      }
    } else if (depth == events_depth && c == ',' && in_events) {
      event = SIZE_MAX;
    } else if (!root_is_events && depth == 1 && c == '"' && i + 1 < n && buf[at[i + 1]] == ':') {
      const char* const end = token_end(buf, size, at, n, i);
      events_key = std::string_view(buf + at[i], end - (buf + at[i])) == "\"traceEvents\"";
    }
  }
  return event;
}

}  // namespace

bool check_json(Parser& parser, std::string_view text, bool root_is_events, JsonFault& fault) {
  const simdjson::internal::dom_parser_implementation& index = *(parser.*implementation_member());
  const std::uint32_t* const at = index.structural_indexes.get();
  const std::uint32_t n = index.n_structural_indexes;
  Stop stop;
  const bool grammar_ok = walk_grammar(text.data(), text.size(), at, n, stop);
  const char* escape_what = nullptr;
  const std::size_t escape_at = bad_escape(text, escape_what);
  if (grammar_ok && escape_at == SIZE_MAX) [[likely]] {
    return true;
  }
  if (grammar_ok || escape_at < stop.at) {
    fault.at = escape_at;
    fault.what = escape_what;
    fault.truncated = false;
    // The token holding the escape: the last entry at or before it.
    std::uint32_t k = 0;
    while (k + 1 < n && at[k + 1] <= escape_at) ++k;
    fault.event_at = event_start(text.data(), text.size(), at, n, k, root_is_events);
    return false;
  }
  fault.at = stop.at;
  fault.what = stop.what;
  fault.truncated = stop.truncated;
  fault.event_at = event_start(text.data(), text.size(), at, n, stop.token, root_is_events);
  return false;
}

void fail_json(const std::string& path, std::int64_t at, std::int64_t event_at,
               const std::string& what, bool truncated) {
  const std::string in_event =
      event_at >= 0 ? " (in the event that starts at byte " + std::to_string(event_at) + ")" : "";
  if (truncated) {
    fail(path, "truncated at byte " + std::to_string(at) +
                   " (the text ends there: was the file cut short?)" + in_event + ": " + what);
  }
  fail(path, "malformed JSON at byte " + std::to_string(at) + in_event + ": " + what);
}

void check_trace_json(const std::string& path, std::string_view padded_text) {
  if (padded_text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail(path, padded_text.empty() ? std::string(kEmptyText) : std::string(kBlankText));
  }
  Parser parser;
  const simdjson::error_code code =
      parser
          .iterate(padded_text.data(), padded_text.size(),
                   padded_text.size() + simdjson::SIMDJSON_PADDING)
          .error();
  if (code == simdjson::MEMALLOC) fail_out_of_memory(path);
  if (code != simdjson::SUCCESS) {
    // Stage 1 refused the text (an unclosed string, invalid UTF-8, a raw control byte in a
    // string): the strict parser names the byte.
    std::size_t off = 0;
    std::string what;
    if (internal::json_error_at(padded_text, off, what)) {
      fail_json(path, static_cast<std::int64_t>(off), -1, what, off == padded_text.size());
    }
    fail(path, "malformed JSON: simdjson cannot parse the text, though the strict parser can");
  }
  check_iterated_json(path, parser, padded_text);
}

void check_iterated_json(const std::string& path, Parser& parser, std::string_view text) {
  JsonFault f;
  if (!check_json(parser, text, false, f)) {
    fail_json(path, static_cast<std::int64_t>(f.at),
              f.event_at == SIZE_MAX ? -1 : static_cast<std::int64_t>(f.event_at), f.what,
              f.truncated);
  }
}

}  // namespace opscope::import

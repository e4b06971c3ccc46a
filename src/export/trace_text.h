// A trace file's text, read once into the buffer simdjson parses: shared by everything that
// reads traces (read_trace, merge_traces, write_traces_with_counters).
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

namespace opscope::internal {

// The bytes of the file at `path`, inflated when they are gzip (by content, not by name; every
// member of a multi-member file), in a buffer padded as simdjson needs. A plain file is read
// straight into that buffer and a gzip file inflated straight into it (libdeflate, sized by
// the gzip trailer), so the text is written once. Throws Error "cannot read trace PATH: ..."
// naming what went wrong (the system's error, or the byte of the bad gzip member).
simdjson::padded_string load_trace_text(const std::string& path);

// A value's JSON text as written (an object or array whole), without the whitespace around it
// (simdjson 3.0 has raw_json() for objects and arrays only; a scalar's token text runs to the
// next token, so it is trimmed); simdjson's error when the value is not well formed.
simdjson::error_code raw_json_text(simdjson::ondemand::value v, std::string_view& out);

// Throws Error "cannot read trace PATH: malformed JSON...": where the strict parser
// (is_valid_json) finds the first problem in `json`, when it does (simdjson finds some errors,
// an unclosed string, before it walks, without a position); else `where` (" (in the event that
// starts at byte N)"), what was `expected` there and simdjson's message for `code`.
[[noreturn]] void fail_malformed(const std::string& path, std::string_view json,
                                 simdjson::error_code code, const std::string& where,
                                 const char* expected);

}  // namespace opscope::internal

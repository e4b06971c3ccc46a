// A trace file's text, read once into the buffer simdjson parses: shared by everything that
// reads traces (read_trace, merge_traces, write_traces_with_counters).
#pragma once

#include <simdjson.h>

#include <string>

namespace opscope::internal {

// The bytes of the file at `path`, inflated when they are gzip (by content, not by name; every
// member of a multi-member file), in a buffer padded as simdjson needs. A plain file is read
// straight into that buffer and a gzip file inflated straight into it (libdeflate, sized by
// the gzip trailer), so the text is written once. Throws Error "cannot read trace PATH: ..."
// naming what went wrong (the system's error, or the byte of the bad gzip member).
simdjson::padded_string load_trace_text(const std::string& path);

}  // namespace opscope::internal

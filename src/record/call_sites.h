// The process's table of call sites: the index a compact range record names its site by
// (CallSite::compact_index, opscope/internal/collector.h) back to the site.
#pragma once

#include <vector>

#include "collect/raw_dump.h"
#include "opscope/record_function.h"

namespace opscope::record {

// The sites registered so far, by compact index (entry 0 is nullptr: no site has index 0).
// A copy, taken under the table's lock: a window's decoder takes it once, after the window's
// records were drained, so every index they hold is in it.
std::vector<const CallSite*> call_sites();

// Every site, one kCallSite section each (src/collect/raw_dump.h), when the table's lock can be
// taken at once; false when it cannot. Never waits: for the flight recorder's crash handler.
bool write_call_sites(collect::raw::RawWriter& out) noexcept;

}  // namespace opscope::record

// read_trace() with the choice of a second core made by the caller: read_traces() gives one to a
// trace only when there are fewer traces than threads.
#pragma once

#include <memory>
#include <string>

#include "opscope/result.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// With `spare_core`, a gzip text is inflated on a thread of its own (TextChunks) or the pieces
// of a plain text of 1 MiB or more are parsed on two threads (PieceQueue).
std::shared_ptr<const ProfilerResult> read_trace(const std::string& path, bool spare_core,
                                                 const TraceReadOptions& options = {});

}  // namespace opscope::import

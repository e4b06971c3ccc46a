// The Kineto / Chrome JSON importer's two ways of reading a text, which read_kineto() (the
// importer table's row, importer.h) chooses between, given to the tests to compare.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "opscope/result.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// A text of any size in bounded memory: the events array parsed in pieces of about
// `batch_bytes` as the file is read `chunk_bytes` at a time (read_kineto() takes 64 KiB for
// both; the tests take sizes down to a byte, to cut everywhere). With `parse_helper`, and unless
// a thread inflates the text ahead, a second thread parses pieces beside this one; the result is
// the same.
std::shared_ptr<const ProfilerResult> read_trace_streaming(
    const std::string& path, std::size_t batch_bytes, std::size_t chunk_bytes,
    bool inflate_ahead = false, bool parse_helper = false, const TraceReadOptions& options = {});

// The text held whole: what read_kineto() falls back on to name the byte where a text is
// malformed (a piece of it names the event).
std::shared_ptr<const ProfilerResult> read_trace_whole(const std::string& path,
                                                       const TraceReadOptions& options = {});

}  // namespace opscope::import

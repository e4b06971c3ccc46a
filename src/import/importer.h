// The importers: one row per format a trace file may be in, told apart by the file's first
// bytes. read_trace() (read_trace.cpp) reads the head of the text, takes the first row whose
// sniff() knows it, and has that row's read() fill a builder.
//
// To read a new format, write its sniff and read in a file of its own (src/import/<format>.cpp),
// declare them below, and add its row to the table in importers.cpp, before the Kineto row:
// that row takes whatever no other row knows, so that a text that is nothing the importers
// know is told what a Chrome trace must hold.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "opscope/result.h"
#include "opscope/trace_reader.h"

namespace opscope::import {

// What an importer reads: the file, and the head of its text.
struct TraceText {
  const std::string& path;
  // The first kHeadBytes of the text, inflated when the file is gzip (fewer when the text is
  // shorter; empty when the file cannot be read, which the importer's read then says).
  std::string_view head;
  // Whether a second core may inflate or parse beside the reading thread (read_traces() gives
  // it to a trace only when there are fewer traces than threads).
  bool spare_core = false;
};

// Enough for every sniff: a Kineto trace's first key and an execution trace's "nodes" come
// within a few hundred bytes.
inline constexpr std::size_t kHeadBytes = 4096;

struct Importer {
  std::string_view name;  // what the format is, for messages and tests
  // Whether `head` (TraceText::head) is the start of a text in this format.
  bool (*sniff)(std::string_view head);
  // Reads the text into `builder` (which the caller then finishes), keeping what `options`
  // says; throws Error "cannot read trace PATH: ..." when it cannot.
  void (*read)(const TraceText& text, ProfilerResult::Builder& builder,
               const TraceReadOptions& options);
};

// The table, in the order the sniffs are asked (importers.cpp).
std::span<const Importer> importers();
// The first row whose sniff knows `head`; the Kineto row, the last, knows every text.
const Importer& importer_for(std::string_view head);

// What the file at `path` is when it is one of the files PyTorch writes beside its traces that
// read_trace() refuses as not being a Chrome trace: the importer's name ("PyTorch execution
// trace (Chakra)", "raw memory timeline"). Empty for anything else (read_trace() reads it, or
// says why it cannot). Reads only the first kHeadBytes of the text (read_trace.cpp).
std::string non_trace_kind(const std::string& path);

// --- the formats (one file each) -----------------------------------------------------------

// Kineto / Chrome JSON, as PyTorch's profiler, Kineto and opscope write it (kineto_importer.cpp).
bool sniff_kineto(std::string_view head);
void read_kineto(const TraceText& text, ProfilerResult::Builder& builder,
                 const TraceReadOptions& options);

// Files that sit beside Kineto traces but are not traces, refused with a message that says
// what they are (refused_formats.cpp): PyTorch's execution trace (Chakra) and the raw memory
// timeline (export_memory_timeline's .raw.json.gz).
bool sniff_execution_trace(std::string_view head);
void refuse_execution_trace(const TraceText& text, ProfilerResult::Builder& builder,
                            const TraceReadOptions& options);
bool sniff_raw_memory_timeline(std::string_view head);
void refuse_raw_memory_timeline(const TraceText& text, ProfilerResult::Builder& builder,
                                const TraceReadOptions& options);

// --- messages more than one importer gives -------------------------------------------------

// An execution trace: the refusal's, and the Kineto reader's for one whose "nodes" come after
// the head.
inline constexpr std::string_view kExecutionTrace =
    "this is an execution trace (Chakra: \"nodes\"), not a Chrome trace with \"traceEvents\"";
// A text that is not a JSON object: the Kineto reader's.
inline constexpr std::string_view kNotAnObject =
    "expected a JSON object at byte 0 (a Chrome trace: {\"traceEvents\": [...]})";
// A raw memory timeline: its refusal (until issue 34 it got kNotAnObject, which did not say
// what the file is).
inline constexpr std::string_view kRawMemoryTimeline =
    "this is a raw memory timeline ([timestamp, action, bytes, category] per change, as "
    "export_memory_timeline writes .raw.json.gz), not a Chrome trace with \"traceEvents\"";

}  // namespace opscope::import

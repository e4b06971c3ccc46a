// opscope/trace_reader.h: reading a trace file back into a ProfilerResult, the model a
// Profiler records into, so that the analyses and exports work on either.
//
//   std::shared_ptr<const opscope::ProfilerResult> result = opscope::read_trace("rank-0.json.gz");
//   for (const opscope::Event& e : result->events()) use(result->category(e), e.name);
//
//   // Ranks in parallel, keeping only what the reports will read (opscope/trace_analysis.h):
//   std::vector<std::string> reports = {"temporal_breakdown"};
//   auto ranks = opscope::read_traces(paths, 0, opscope::what_reports_read(reports));
//
// The formats read are listed in src/import/importers.cpp; a file is told apart by its first
// bytes, not by its name.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "opscope/result.h"

namespace opscope {

// Reads a Chrome / Kineto trace (.json, or .json.gz by its content) as PyTorch's profiler or
// opscope wrote it: CPU ops and user annotations as ranges, GPU kernels, copies and sets on
// their streams' threads, runtime and driver calls, flows, processes and threads with their
// names, the rank (distributedInfo.rank), the top-level keys as metadata; every other event
// category and every arg without a field of its own is kept (ProfilerResult::other_args), so
// an export writes them back. Timestamps keep their nanoseconds. Throws opscope::Error naming the
// file, the byte offset and what was expected when the file is not a trace: strict JSON
// (RFC 8259: no NaN, no leading zeros, no ".5", no trailing commas), one top-level object with
// each key once and nothing after it, read from a regular file (a FIFO or a device is refused,
// not waited on); "truncated at byte N" when the text ends early; "out of memory while reading
// it" when an allocation fails.
// The text is read in 64 KiB pieces, so the memory a read takes is the model it builds, not the
// text. On a machine with more than one core, a gzip text is inflated by a second thread
// beside the reading, and a plain text of 1 MiB or more has its pieces parsed on two threads.
std::shared_ptr<const ProfilerResult> read_trace(const std::string& path);

// How far a read goes into a file that may be hostile (a truncated copy, a file from another
// tool, a gzip bomb), so that its memory stays bounded by the file's size; past a limit the
// read throws opscope::Error naming the file, the limit and how to raise it. The defaults
// leave every real trace well inside them.
struct TraceLimits {
  // A gzip file's text may inflate to this many times the file's size, or to 64 MiB when that
  // is more: real traces inflate 5 to 30 times, a gzip bomb up to 1032 times (1 MB of gzip,
  // 1 GiB of spaces). The trailer's stated size is a hint within this limit, never an
  // allocation. 0: no limit. `--max-gzip-ratio` of opscope analyze, merge and analyze diff.
  double max_gzip_ratio = 100;
  // The most bytes one event's JSON, or the text around the events array (the top-level
  // keys), may take: reading one takes several times its size at once (the text, simdjson's
  // index of it, its args kept). A real event takes well under 1 MiB. 0: no limit.
  // `--max-event-size` of opscope analyze.
  std::int64_t max_event_bytes = std::int64_t{64} << 20;
};

// How a read holds the trace's times: as written, or as HTA (Holistic Trace Analysis) holds them,
// so that the reports give HTA's numbers. HTA reads the events into a pandas frame: when its
// "ts" column is float64 (some event writes ts with a fraction or an exponent, or has no ts)
// every time is a double of microseconds since 1970, and at today's 1.7e15 us a double steps
// by 0.25 us; hta/common/trace_parser.py round_down_time_stamps then rounds each event inward
// unless HTA_DISABLE_NS_ROUNDING=1. A trace whose ts are all whole numbers is held as written
// in every mode, as HTA holds it (a fractional dur too).
enum class TraceTimes : std::uint8_t {
  // The nanoseconds as written (opscope's default).
  kNanoseconds,
  // HTA's default: ceil(ts), end = floor(ts + dur), dur = end - ts in HTA's doubles, which is
  // negative when the event held no whole microsecond (kept so: HTA's sums count it). An
  // event without a dur (an instant, a flow's end) gets ceil(ts). `opscope analyze
  // --hta-rounding`; the Python API unless HTA_DISABLE_NS_ROUNDING=1.
  kHtaRounded,
  // HTA with HTA_DISABLE_NS_ROUNDING=1: each ts the double Python reads from its text (to
  // 0.25 us at today's epoch; the dur as written). Gaps of under a quarter of a microsecond
  // are then where HTA's comparisons (an idle gap's cause) differ from the exact ones. The
  // Python API with HTA_DISABLE_NS_ROUNDING=1.
  kHtaFloat,
};

// What a read keeps of a trace: everything by default. A caller that knows what it will ask of
// the model (`opscope analyze`, for the reports it was given: what_reports_read() in
// opscope/trace_analysis.h)
// may leave out what nothing will read, which takes less time and memory. What is left out is
// still checked to be JSON (numbers, commas, brackets, escapes): the verdict on a file is the
// same whatever is read of it.
struct TraceReadOptions {
  // The args of CPU ranges (operators, user annotations): input shapes and types, External
  // id, sequence numbers and the args no field holds. Their times, names and threads stay.
  bool cpu_range_args = true;
  // Flow events ("s", "t", "f": Kineto's launch and forward-backward arrows).
  bool flows = true;
  // CPU ranges (operators, user annotations) other than the profiler steps ("ProfilerStep#N"),
  // most of a trace's events. One left out is left as soon as its phase, category and name
  // are read; only its pid and tid are read further, so that the recording process is still
  // the one with the most CPU ranges (ProfilerResult::pid()).
  bool cpu_ranges = true;
  // The args of the events that no field of the model holds (ProfilerResult::other_args: a
  // kernel's occupancy, a copy's bandwidth, what another tool added), kept so that an export
  // writes them back.
  bool other_args = true;
  // The times as written, or as HTA holds them (`times`, TraceTimes below).
  TraceTimes times = TraceTimes::kNanoseconds;
  // How far it reads into a hostile file.
  TraceLimits limits;
};

// read_trace() of every path, on up to `threads` threads at once (0: one per core), in the
// order given, keeping what `options` says. Throws the error of the first path (in that order)
// that could not be read. A trace gets a second thread (inflating gzip, or parsing a plain
// text of 1 MiB or more) only when there are fewer paths than `threads`.
std::vector<std::shared_ptr<const ProfilerResult>> read_traces(
    std::span<const std::string> paths, unsigned threads = 0, const TraceReadOptions& options = {});

}  // namespace opscope

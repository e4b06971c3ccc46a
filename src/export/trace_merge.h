// trace_merge.h: the traces of a job's ranks as one Chrome trace, for Perfetto UI
// (`opscope merge`, tools/merge_command.cpp).
//
//   std::unique_ptr<Sink> sink = open_file_sink("merged.json.gz", {.what = "merged trace"});
//   std::vector<MergedRank> ranks = merge_traces({"rank-0.json.gz", "rank-1.json.gz"}, *sink);
//   sink->commit();
//
// Every event of every rank is copied as it was written (times untouched: the ranks of a job
// share a wall clock) except for what keeps ranks apart: each rank's processes get pids of
// their own, are named "rank N: <their name>" and sorted by rank; ids ("id", "bind_id": flows,
// async events, counters) are renumbered so that no two ranks share one. Each rank's other
// top-level keys (distributedInfo, deviceProperties, ...) are kept under "opscopeMerged".
//
// The events are rewritten from the files' text (simdjson On-Demand), not read into the
// result model, which holds no counters or async events: nothing a rank's trace holds is lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "export/sink.h"
#include "opscope/trace_reader.h"

namespace opscope::internal {

// What merge_traces() did with one input.
struct MergedRank {
  std::string path;
  std::int64_t rank = -1;  // distributedInfo.rank, else the position among the inputs
  bool rank_from_position = false;
  std::uint64_t events = 0;        // events of the input, all copied
  std::uint64_t added_events = 0;  // process_name / process_sort_index added where missing
  std::uint64_t processes = 0;
  std::int64_t first_pid = 0;  // its processes have pids first_pid .. first_pid + processes - 1
};

// Merges the traces at `paths` (.json or .json.gz, one rank each) into one written to
// `sink`, ranks in rank order. Returns what each input became, in that order. Throws Error
// naming the file and the byte offset for one that is not a Chrome trace; the sink is then
// left uncommitted (the caller's file sink leaves no file). Reads each file twice (once to
// learn its rank and processes, once to copy it), one file in memory at a time.
// Reads each text within `limits` (the gzip ratio; an event's size does not apply: the text is
// held whole, as simdjson walks it).
std::vector<MergedRank> merge_traces(const std::vector<std::string>& paths, Sink& sink,
                                     const TraceLimits& limits = {});

}  // namespace opscope::internal

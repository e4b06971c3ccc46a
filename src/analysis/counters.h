// The counter time series of Holistic Trace Analysis (hta/analyzers/trace_counters.py) in
// whole nanoseconds of the trace's own clock (counter_series.cpp), shared by the reports of
// src/analysis/reports/queue.cpp and counters.cpp (which shift them to HTA's aligned
// microseconds) and by the trace writer of src/export/trace_with_counters.cpp (which writes
// them back as "C" events at their absolute times, as generate_trace_with_counters does).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "opscope/result.h"

namespace opscope::internal {

// One change of a stream's launch queue: a launch (+1, at the runtime call's start) or the
// start of the GPU work it launched (-1). pid, tid and stream are the GPU work's.
struct QueuePoint {
  std::int64_t ts_ns;
  std::int64_t pid;
  std::int64_t tid;
  std::int64_t stream;
  std::int64_t queue_length;  // after the change
};

// HTA's _get_queue_length_time_series_for_rank: the points of each stream in ascending
// stream order, each stream's in time order. `drop_last`: leave out the last profiler step
// and what it launched, as HTA's filtered trace does.
std::vector<QueuePoint> queue_length_series(const ProfilerResult& r, bool drop_last);

// One change of the bandwidth of a kind of copy, summed over every stream of the rank.
struct BandwidthPoint {
  std::int64_t ts_ns;
  std::int64_t pid;
  std::string name;  // "Memcpy DtoH", "Memset", ...
  double gbps;       // after the change
};

// HTA's _get_memory_bw_time_series_for_rank: per kind of copy in name order, in time order.
std::vector<BandwidthPoint> memory_bw_series(const ProfilerResult& r, bool drop_last);

// HTA's Trace.min_ts: the earliest start, over every rank, of the events its DataFrames hold
// (complete events with a category other than "Trace"), which its time series count from.
std::int64_t aligned_origin_ns(std::span<const std::shared_ptr<const ProfilerResult>> ranks);

}  // namespace opscope::internal

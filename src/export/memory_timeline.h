// memory_timeline.h: the memory timeline exporter behind Profiler::export_memory_timeline, in
// PyTorch's four formats, chosen by the path's suffix:
//
//   .html         a self-contained page (inline SVG, no script, nothing fetched): memory by
//                 category stacked over time, with axes, units, legend and the peak
//   .json         [times_us, sizes]: PyTorch's export_memory_timeline, byte for byte as its
//                 json.dump writes it ("[[t0, t1], [[0, a, b, ...], ...]]")
//   .json.gz      the same, gzipped
//   .raw.json.gz  [[timestamp_ns, action, numbytes, category], ...]: PyTorch's
//                 export_memory_timeline_raw, gzipped
//
//   internal::export_memory_timeline(result, "mem.html", "cpu");
//
// The model (what counts as CREATE, DESTROY, PREEXISTING) is src/analysis/memory_timeline.h.
#pragma once

#include <string>
#include <string_view>

#include "analysis/memory_timeline.h"
#include "export/sink.h"
#include "opscope/result.h"

namespace opscope::internal {

enum class MemoryTimelineFormat : std::uint8_t {
  kHtml = 0,
  kJson = 1,
  kJsonGz = 2,
  kRawJsonGz = 3,
};

// The format `path` asks for. Throws opscope::Error naming the path and the suffixes allowed.
MemoryTimelineFormat memory_timeline_format(const std::string& path);

// Throws opscope::Error when `result` was recorded without record_shapes, profile_memory or
// with_stack (PyTorch requires all three), naming each one missing.
void check_memory_timeline_lenses(const ProfilerResult& result);

// Parses `device` ("cpu", "cuda", "cuda:1"). Throws opscope::Error naming the value and the
// forms allowed.
Device parse_timeline_device(std::string_view device);

// Writes the timeline of `device` in `format` to `sink` and commits it. Throws what the sink
// throws (the sink is then left uncommitted). Checks nothing about the result's lenses.
void write_memory_timeline(const ProfilerResult& result, Device device, MemoryTimelineFormat format,
                           Sink& sink);

// The HTML page for a coalesced timeline. `end_us` is when the window ended (the last state
// is drawn up to it; use the last time when unknown).
std::string memory_timeline_html(const analysis::CoalescedTimeline& timeline, Device device,
                                 std::int64_t end_us);

// Checks the lenses, the device and the suffix (in that order), then writes `path` through a
// temporary file renamed when complete: a failure leaves no file behind. Throws
// opscope::Error.
void export_memory_timeline(const ProfilerResult& result, const std::string& path,
                            std::string_view device);

}  // namespace opscope::internal

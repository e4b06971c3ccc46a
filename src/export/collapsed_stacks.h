// collapsed_stacks.h: the stack file of export_stacks(path, metric), in the "collapsed" (folded)
// format that flamegraph.pl and speedscope read:
//
//   main;train_step();nn.Module:_Linear_0;model.cpp(42):_Linear::forward();aten::linear 1234
//
// One line per distinct stack: frames root first joined by ";", a space, then the metric in
// integer microseconds. Each stack ends with the range's own name as its innermost frame
// (PyTorch's ends with the Python frame that called the op), so a flame graph shows which
// operator the time went to. Spaces and ";" inside a frame become "_", as PyTorch writes them.
#pragma once

#include <string>
#include <string_view>

#include "export/sink.h"
#include "opscope/result.h"

namespace opscope::internal {

// Appends one frame's text to a collapsed stack; the characters that would split a frame or a
// line (space, ';', tab, newlines) become "_", as PyTorch writes them. Shared with the
// sampling profiler's stacks, so both files read the same in flame-graph tools.
void append_collapsed_frame(std::string& out, std::string_view text);

// Writes the stack file of `result` for `metric` ("self_cpu_time_total" or
// "self_cuda_time_total") to `sink` and commits it.
//
// Events of the same stack and name are summed (in nanoseconds, then rounded to whole
// microseconds); stacks that round to 0 are left out, as PyTorch leaves out zero values.
// Throws opscope::Error for an unknown metric (naming the allowed ones) and for a result
// recorded without with_stack. self_cuda_time_total is accepted, as in PyTorch, but this
// result holds no device time: the file is empty and a warning says why. Symbolizes every
// distinct return address once (src/analysis/symbolizer.h).
void write_collapsed_stacks(const ProfilerResult& result, std::string_view metric, Sink& sink);

// The same into the file `path` (gzip when it ends in ".gz"), written to a temporary name
// and renamed when complete: a failed export leaves nothing behind.
void export_collapsed_stacks(const ProfilerResult& result, const std::string& path,
                             std::string_view metric);

}  // namespace opscope::internal

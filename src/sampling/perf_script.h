// perf_script.h: reading the samples back from `perf script`'s text.
//
// The perf backend runs
//
//   perf script -i perf.data -F tid,time,event,period,ip,sym,dso --ns
//
// which prints one block per sample, blocks separated by blank lines:
//
//   31708 12703.804876195:    1001001 cpu-clock:ppp:
//   	           1462a handle_amd (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
//   	               0 [unknown] ([unknown])
//
// The header holds the thread id, the time (seconds.nanoseconds of the clock perf record was
// told to use, CLOCK_MONOTONIC here), the period and the event; each following line, indented
// with a tab, is one frame, innermost first: address, symbol (C++ names demangled, so they may hold spaces and
// parentheses), and the object file in parentheses.
#pragma once

#include <string>
#include <string_view>

#include "opscope/sampling.h"

namespace opscope::sampling {

// What one frame is called in stacks: the symbol; for an unknown symbol the object file's
// base name in brackets ("[libfoo.so]"), or "[unknown]" when that is unknown too.
std::string frame_name(std::string_view symbol, std::string_view dso);

// Parses `text` (the whole output of the command above) into `batch.samples`, keeping at most
// `max_frames` innermost frames per sample, and sets `batch.event` to the event named by the
// first sample (perf's modifiers such as ":ppp" or ":u" removed). Throws opscope::Error naming
// the line number and the line when a header or frame line does not have the shape above.
void parse_perf_script(std::string_view text, std::size_t max_frames, SampleBatch& batch);

}  // namespace opscope::sampling

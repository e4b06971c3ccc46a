// range_log.h: which ranges were open on which thread, and when, while a FunctionProfiler run
// samples, so that samples can be attributed to the operator they fell in.
//
// A global observer of the record layer appends each range at its start to its thread's log
// (counter ticks, name) and sets its end time at its end; take() turns ticks into
// CLOCK_MONOTONIC ns, the clock perf is told to stamp samples with. It does not need a Profiler
// session: observers see every range. Per range it costs the observer call, two clock reads and
// two uncontended locks of the thread's own log (bench/sampling_bench.cpp), which is why it is
// attached only for the run.
#pragma once

#include <memory>
#include <vector>

#include "opscope/record_function.h"
#include "opscope/sampling.h"
#include "opscope/observer.h"

namespace opscope::sampling {

class RangeLog {
 public:
  RangeLog();   // attaches the observer
  ~RangeLog();  // detaches it
  RangeLog(const RangeLog&) = delete;
  RangeLog& operator=(const RangeLog&) = delete;

  // Detaches the observer and returns the ranges seen, in CLOCK_MONOTONIC ns; those still open
  // end at UINT64_MAX. Ranges that end later are not updated (their end callback finds the log
  // closed).
  std::vector<SampledRange> take();

  struct State;

 private:
  std::shared_ptr<State> state_;
  CallbackHandle handle_ = 0;
};

// The calling thread's id as perf reports it (gettid), cached per thread.
std::int32_t current_tid() noexcept;

}  // namespace opscope::sampling

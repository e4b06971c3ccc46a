// opscope/opscope.h: everything most users need.
//
//   #include <opscope/opscope.h>
//
//   void step() { OPSCOPE_RECORD_FUNCTION("my_op"); ... }
//
//   opscope::Profiler prof;
//   prof.start();  step();  prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total"});
//   prof.export_chrome_trace("trace.json");
#pragma once

#include "opscope/error.h"
#include "opscope/execution_trace.h"
#include "opscope/export.h"
#include "opscope/function_profiler.h"
#include "opscope/internal/requires_cxx20.h"
#include "opscope/key_averages.h"
#include "opscope/legacy.h"
#include "opscope/mark.h"
#include "opscope/observer.h"
#include "opscope/memory.h"
#include "opscope/module.h"
#include "opscope/ondemand.h"
#include "opscope/profiler.h"
#include "opscope/record_function.h"
#include "opscope/report_output.h"
#include "opscope/result.h"
#include "opscope/sampling.h"
#include "opscope/schedule.h"
#include "opscope/thread_local_state.h"
#include "opscope/trace_reader.h"
#include "opscope/value.h"
#include "opscope/version.h"

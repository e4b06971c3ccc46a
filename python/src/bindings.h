// Registration functions of the extension module opscope._C, one per source file; module.cpp
// calls each from PYBIND11_MODULE.
#pragma once

#include <pybind11/pybind11.h>

namespace opscope::python {

// Errors and warnings: opscope::Error as RuntimeError, the warning handler as Python warnings
// (python/src/errors.cpp).
void bind_errors(pybind11::module_& m);
// Profiler, schedules, activities, ExecutionTraceObserver (python/src/profiler.cpp).
void bind_profiler(pybind11::module_& m);
// What a finished window holds: EventList, FunctionEvent, KeyAverages
// (python/src/results.cpp).
void bind_results(pybind11::module_& m);
// The record_function context manager's native part (python/src/record_function.cpp).
void bind_record_function(pybind11::module_& m);
// The C API capsule for extensions, opscope._C._C_API (python/src/capi.cpp).
void bind_capi(pybind11::module_& m);
// Helpers the tests drive: ranges recorded by C++ threads (python/src/testing.cpp).
void bind_testing(pybind11::module_& m);

// RecordFunctionFast: a C-level context manager type (python/src/record_function_fast.cpp).
void bind_record_function_fast(pybind11::module_& m);
// opscope.traceback: capture() and the CapturedTraceback type (python/src/traceback.cpp).
void bind_traceback(pybind11::module_& m);
// TraceFile, report_kinds() and run_report(), the engine of opscope.analysis
// (python/src/analysis.cpp).
void bind_analysis(pybind11::module_& m);
// The flight recorder: FlightRecorder, dump_flight_recorder(), decode_flight_dump()
// (python/src/flight_recorder.cpp).
void bind_flight_recorder(pybind11::module_& m);

}  // namespace opscope::python

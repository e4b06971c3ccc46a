// The extension module opscope._C: the native half of the opscope Python package. The
// public API is python/opscope/profiler.py; what is here is its engine.
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "opscope's native module; use opscope.profiler instead of this module directly.";
  m.attr("__version__") = "0.1.0";
  opscope::python::bind_errors(m);
  opscope::python::bind_profiler(m);
  opscope::python::bind_results(m);
  opscope::python::bind_record_function(m);
  opscope::python::bind_capi(m);
  opscope::python::bind_testing(m);
  opscope::python::bind_record_function_fast(m);
  opscope::python::bind_traceback(m);
  opscope::python::bind_analysis(m);
  opscope::python::bind_flight_recorder(m);
}

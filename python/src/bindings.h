// Registration functions of the extension module opscope._C, one per source file; module.cpp
// calls each from PYBIND11_MODULE.
#pragma once

#include <pybind11/pybind11.h>

namespace opscope::python {

// RecordFunctionFast: a C-level context manager type (python/src/record_function_fast.cpp).
void bind_record_function_fast(pybind11::module_& m);
// opscope.traceback: capture() and the CapturedTraceback type (python/src/traceback.cpp).
void bind_traceback(pybind11::module_& m);

}  // namespace opscope::python

// Python stacks for with_stack and the opscope.module scope type (python_stacks.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace opscope::python {

// Adds _C.ModuleScope and installs the record layer's foreign stack provider, so that ranges
// begun while Python code runs on the thread carry its Python frames. Called once, from
// bind_traceback (module init).
void bind_python_stacks(pybind11::module_& m);

}  // namespace opscope::python

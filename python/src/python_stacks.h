// Python stacks for with_stack and the opscope.module scope type (python_stacks.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace opscope::python {

// Adds _C.ModuleScope and installs the record layer's foreign stack provider, so that ranges
// begun while Python code runs on the thread carry its Python frames. Called once, from
// bind_traceback (module init).
void bind_python_stacks(pybind11::module_& m);

// While one lives, the ranges its thread begins without holding the GIL (the Profiler's step
// ranges, begun inside start() and step() once the binding has released the GIL) take the
// Python frames of the moment it was made, as if the GIL were held. Make it with the GIL held,
// then release the GIL; `wanted` false (the profile records no stacks) captures nothing.
class PythonStackSnapshot {
 public:
  explicit PythonStackSnapshot(bool wanted) noexcept;
  ~PythonStackSnapshot();
  PythonStackSnapshot(const PythonStackSnapshot&) = delete;
  PythonStackSnapshot& operator=(const PythonStackSnapshot&) = delete;

 private:
  bool active_ = false;
};

}  // namespace opscope::python

// opscope::Error as Python's RuntimeError, and opscope's warnings as Python warnings.
#include <cstdio>
#include <string>
#include <string_view>

#include "bindings.h"
#include "common.h"
#include "py_compat.h"

namespace opscope::python {

namespace {

// The warning handler while the module is loaded: each opscope warning ("Profiler won't be
// using warmup", "on_trace_ready was never called", ...) becomes a UserWarning, so that
// Python's filters, logging and pytest.warns see it. Warnings may come from threads without
// the GIL (a Profiler stopping with the GIL released), hence the acquire.
void python_warning(std::string_view message) {
  const std::string text(message);
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    std::fprintf(stderr, "opscope warning: %s\n", text.c_str());
    return;
  }
  py::gil_scoped_acquire gil;
  // A warning may be raised while a Python exception is pending (a Profiler destroyed during
  // unwinding); keep that exception as it was.
  py::error_scope pending;
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) != 0) {
    // The filters turned the warning into an error ("-W error"). The C++ caller cannot take
    // a Python exception at this point, so the message goes to stderr instead.
    PyErr_Clear();
    std::fprintf(stderr, "opscope warning: %s\n", text.c_str());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  // Explicit, although pybind11's default mapping of std::runtime_error would pick the same
  // type: the message is the point, and it stays opscope's word for word.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  set_warning_handler(python_warning);
  // Warnings after the interpreter has started to shut down (a Profiler destroyed by a static
  // destructor) must not touch Python.
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { set_warning_handler({}); }));
  m.def(
      "_warn", [](const std::string& message) { warn(message); }, py::arg("message"),
      "Sends a message through opscope's warning handler (for tests).");
}

}  // namespace opscope::python

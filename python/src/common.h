// What the binding files share: Python objects held by C++ code, and the mapping of
// opscope::Error to the Python exception a call's misuse deserves.
#pragma once

#include <pybind11/pybind11.h>
// In every binding file, so that the STL casters are the same in all of them (ODR).
#include <pybind11/stl.h>

#include <utility>

#include "opscope/error.h"

namespace opscope::python {

namespace py = pybind11;

// A Python object owned by C++ code that may drop it on a thread that does not hold the GIL
// (a schedule or on_trace_ready inside a ProfilerConfig dies with its Profiler, wherever that
// happens). Dropping it takes the GIL; after interpreter shutdown the reference is leaked
// rather than touched.
class PyRef {
 public:
  explicit PyRef(py::object object) : object_(std::move(object)) {}
  ~PyRef() {
    if (!object_) return;
    if (!Py_IsInitialized()) {
      object_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    object_ = py::object();
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;

  const py::object& get() const { return object_; }

 private:
  py::object object_;
};

// Runs `fn` and names the Python call `call` ("profile.start()") in the opscope::Error it
// throws, in place of the C++ call the library names ("Profiler::start()"): RuntimeError
// "<call>: <detail>", the detail word for word. Without the GIL is fine (nothing Python is
// touched until the exception is translated).
template <typename Fn>
decltype(auto) in_call(const char* call, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const Error& e) {
    throw Error(call, e.detail());  // RuntimeError (errors.cpp)
  }
}

// Runs `fn` and turns opscope::Error into ValueError: for calls whose only failures are bad
// arguments (schedule values, sort keys, JSON metadata), as profiler.py raises ValueError
// there. Every other opscope::Error reaches Python as RuntimeError (errors.cpp).
template <typename Fn>
decltype(auto) value_errors(Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace opscope::python

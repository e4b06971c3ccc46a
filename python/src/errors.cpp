// opscope::Error as Python's RuntimeError, opscope's warnings as Python warnings (at the
// user's line), and its information as records of the "opscope" logger.
#include <cstdio>
#include <string>
#include <string_view>

#include "bindings.h"
#include "common.h"
#include "py_compat.h"
#include "python_frames.h"

namespace opscope::python {

namespace {

// The opscope package's folder ("/.../opscope/"), where opscope/__init__.py is: warnings are
// attributed to the first frame whose file is not in it. Read with the GIL held at a warning
// once the package is imported (its __file__ is set only after _C has loaded), then kept;
// leaked, as warnings may come until exit. Empty before that, or when _C is loaded alone.
const std::string& package_dir() {
  static const std::string* dir = nullptr;
  static const std::string none;
  if (dir != nullptr) return *dir;
  try {
    const py::dict modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("opscope")) return none;
    const py::object file = py::getattr(modules["opscope"], "__file__", py::none());
    if (file.is_none()) return none;
    const std::string text = py::str(py::module_::import("os.path").attr("dirname")(file));
    dir = new std::string(text + "/");
    return *dir;
  } catch (const py::error_already_set&) {
    return none;
  }
}

// The stacklevel of PyErr_WarnEx that names the first Python frame outside the opscope
// package: the user's `p.step()` or `with profile(...)` line rather than profiler.py's call
// into the native module. 1 (the innermost frame) when every frame is opscope's or there is
// none (a C++ thread). The walk is the same the stacks use (python_frames.h), and counts
// frames as PyErr_WarnEx steps back through them.
int user_stack_level() {
  const std::string& package = package_dir();
  if (package.empty()) return 1;
  constexpr std::size_t kMaxFrames = 64;
  RawFrame frames[kMaxFrames];
  const std::size_t n = walk_python_frames(frames, kMaxFrames);
  for (std::size_t i = 0; i < n; ++i) {
    // Through the attribute, not the struct member, whose layout is the interpreter's.
    const py::object name = py::reinterpret_steal<py::object>(
        PyObject_GetAttrString(reinterpret_cast<PyObject*>(frames[i].code), "co_filename"));
    Py_ssize_t size = 0;
    const char* text =
        name && PyUnicode_Check(name.ptr()) ? PyUnicode_AsUTF8AndSize(name.ptr(), &size) : nullptr;
    if (text == nullptr) {
      PyErr_Clear();
      return 1;
    }
    if (!std::string_view(text, static_cast<std::size_t>(size)).starts_with(package)) {
      return static_cast<int>(i) + 1;
    }
  }
  return 1;
}

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
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), user_stack_level()) != 0) {
    // The filters turned the warning into an error ("-W error"). The C++ caller cannot take
    // a Python exception at this point, so the message goes to stderr instead.
    PyErr_Clear();
    std::fprintf(stderr, "opscope warning: %s\n", text.c_str());
  }
}

// The info handler while the module is loaded: opscope's information ("on-demand: trace
// written to ...") is a record of logging.getLogger("opscope") at INFO, shown where the
// program configured logging to show it; never a warning. As python_warning, from any thread.
void python_info(std::string_view message) {
  const std::string text(message);
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    std::fprintf(stderr, "opscope: %s\n", text.c_str());
    return;
  }
  py::gil_scoped_acquire gil;
  py::error_scope pending;
  try {
    py::module_::import("logging").attr("getLogger")("opscope").attr("info")(text);
  } catch (const py::error_already_set&) {
    // A broken logging setup (a handler that raises): the line still reaches someone.
    std::fprintf(stderr, "opscope: %s\n", text.c_str());
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
  set_info_handler(python_info);
  // Warnings after the interpreter has started to shut down (a Profiler destroyed by a static
  // destructor) must not touch Python.
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    set_warning_handler({});
    set_info_handler({});
  }));
  m.def(
      "_warn", [](const std::string& message) { warn(message); }, py::arg("message"),
      "Sends a message through opscope's warning handler (for tests).");
  m.def(
      "_inform", [](const std::string& message) { inform(message); }, py::arg("message"),
      "Sends a message through opscope's info handler (for tests).");
}

}  // namespace opscope::python

// The few CPython calls whose name or availability changed between 3.9 and 3.15, behind one
// name each, so that the binding files read the same on every version. Everything here is
// public C API (or, before the version that made it public, the exported name it replaced).
#pragma once

#include <Python.h>

// PyFrame_GetBack (3.9) is declared by cpython/frameobject.h, which Python.h includes only
// from 3.11 on (through cpython/pyframe.h); on 3.9 and 3.10 it takes frameobject.h.
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif

namespace opscope::python {

// True once the interpreter has begun to shut down: Py_IsFinalizing from 3.13, the
// underscored name before (removed in 3.13).
inline bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// The calling thread's state, nullptr when it has none; never a fatal error. Public from 3.13
// (PyThreadState_GetUnchecked); the exported _PyThreadState_UncheckedGet before.
inline PyThreadState* thread_state_or_null() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked();
#else
  return _PyThreadState_UncheckedGet();
#endif
}

// Keeps the calling thread's pending exception, if any, aside for the scope's life, and
// clears whatever the scope raised before putting it back: for walks that must leave
// Python's error state as they found it.
class PendingErrorKept {
 public:
#if PY_VERSION_HEX >= 0x030C0000
  PendingErrorKept() noexcept : raised_(PyErr_GetRaisedException()) {}
  ~PendingErrorKept() {
    PyErr_Clear();
    PyErr_SetRaisedException(raised_);
  }
#else
  PendingErrorKept() noexcept { PyErr_Fetch(&type_, &value_, &traceback_); }
  ~PendingErrorKept() {
    PyErr_Clear();
    PyErr_Restore(type_, value_, traceback_);
  }
#endif
  PendingErrorKept(const PendingErrorKept&) = delete;
  PendingErrorKept& operator=(const PendingErrorKept&) = delete;

 private:
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* raised_;
#else
  PyObject* type_ = nullptr;
  PyObject* value_ = nullptr;
  PyObject* traceback_ = nullptr;
#endif
};

}  // namespace opscope::python

// Py_NewRef and Py_XNewRef arrived in 3.10.
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject* Py_NewRef(PyObject* object) {
  Py_INCREF(object);
  return object;
}
static inline PyObject* Py_XNewRef(PyObject* object) {
  Py_XINCREF(object);
  return object;
}
#endif

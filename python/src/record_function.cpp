// opscope.profiler.record_function: a USER_SCOPE range with a dynamic name, as a C-level type.
//
// Why not a pybind11 class: constructing a pybind11 object costs about 600 ns (argument
// casting, holder allocation), three times the budget of a whole range. This type is
// constructed through vectorcall and its __enter__/__exit__ are METH_NOARGS/METH_FASTCALL
// methods, so a `with record_function(...)` block costs about what a `with` on a trivial
// Python context manager costs, plus the range. With no session active __enter__ is one
// relaxed load and a branch beyond that (bench/python_bench.py measures it).
//
// The decorator form (__call__) is written in Python (opscope.profiler._decorate): it runs
// once per decorated function, not per call.
#include <Python.h>

#include <new>
#include <span>
#include <string_view>

#include "bindings.h"
#include "common.h"
#include "opscope/record_function.h"
#include "opscope/value.h"

namespace opscope::python {

namespace {

struct UserRange {
  PyObject_HEAD
  PyObject* name;  // str
  PyObject* args;  // str or None
  bool entered;
  bool recording;  // `range` holds a live RecordFunction
  alignas(RecordFunction) unsigned char range[sizeof(RecordFunction)];
};

PyTypeObject g_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

RecordFunction* range_of(UserRange* self) {
  return std::launder(reinterpret_cast<RecordFunction*>(self->range));
}

void end_range(UserRange* self) {
  if (self->recording) {
    range_of(self)->~RecordFunction();  // ends the range
    self->recording = false;
  }
  self->entered = false;
}

// Builds the object from already parsed arguments; `args` may be nullptr (not given).
PyObject* make(PyTypeObject* type, PyObject* name, PyObject* args) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "record_function: name must be a string, got %.100s",
                 Py_TYPE(name)->tp_name);
    return nullptr;
  }
  if (args == nullptr) args = Py_None;
  if (args != Py_None && !PyUnicode_Check(args)) {
    PyErr_Format(PyExc_TypeError, "record_function: args must be a string or None, got %.100s",
                 Py_TYPE(args)->tp_name);
    return nullptr;
  }
  auto* self = reinterpret_cast<UserRange*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(name);
  Py_INCREF(args);
  self->name = name;
  self->args = args;
  self->entered = false;
  self->recording = false;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* vectorcall_new(PyObject* type, PyObject* const* argv, std::size_t nargsf,
                         PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* name = nargs > 0 ? argv[0] : nullptr;
  PyObject* args = nargs > 1 ? argv[1] : nullptr;
  if (nargs > 2) {
    PyErr_Format(PyExc_TypeError, "record_function() takes at most 2 arguments (%zd given)",
                 nargs);
    return nullptr;
  }
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    PyObject* value = argv[nargs + i];
    PyObject** slot = nullptr;
    if (PyUnicode_CompareWithASCIIString(key, "name") == 0) {
      slot = &name;
    } else if (PyUnicode_CompareWithASCIIString(key, "args") == 0) {
      slot = &args;
    } else {
      PyErr_Format(PyExc_TypeError, "record_function() got an unexpected keyword argument '%U'",
                   key);
      return nullptr;
    }
    if (*slot != nullptr) {
      PyErr_Format(PyExc_TypeError, "record_function() got multiple values for argument '%U'",
                   key);
      return nullptr;
    }
    *slot = value;
  }
  if (name == nullptr) {
    PyErr_SetString(PyExc_TypeError, "record_function() missing required argument 'name'");
    return nullptr;
  }
  return make(reinterpret_cast<PyTypeObject*>(type), name, args);
}

// The slow path of construction (a call with a **kwargs dict, or from C), through tp_new.
PyObject* tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"name", "args", nullptr};
  PyObject* name = nullptr;
  PyObject* range_args = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:record_function",
                                   const_cast<char**>(keywords), &name, &range_args)) {
    return nullptr;
  }
  return make(type, name, range_args);
}

void dealloc(PyObject* object) {
  auto* self = reinterpret_cast<UserRange*>(object);
  end_range(self);
  Py_XDECREF(self->name);
  Py_XDECREF(self->args);
  Py_TYPE(object)->tp_free(object);
}

PyObject* enter(PyObject* object, PyObject*) {
  auto* self = reinterpret_cast<UserRange*>(object);
  if (self->entered) {
    PyErr_Format(PyExc_ValueError,
                 "record_function('%U') is already entered; use a new record_function for a "
                 "nested or concurrent range",
                 self->name);
    return nullptr;
  }
  self->entered = true;
  // No session and no observer: nothing to name, nothing to end.
  if (internal::g_state.load(std::memory_order_relaxed) != 0) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(self->name, &size);  // cached by the str
    if (utf8 == nullptr) return nullptr;
    const std::string_view name(utf8, static_cast<std::size_t>(size));
    auto* range = new (self->range) RecordFunction(RecordScope::kUserScope);
    self->recording = true;
    // `args` is the range's one input, recorded only when someone records inputs
    // (record_shapes), as torch's record_function does.
    if (self->args != Py_None && range->wants_inputs()) {
      Py_ssize_t args_size = 0;
      const char* args_utf8 = PyUnicode_AsUTF8AndSize(self->args, &args_size);
      if (args_utf8 == nullptr) return nullptr;
      const Value input(std::string_view(args_utf8, static_cast<std::size_t>(args_size)));
      range->before(name, std::span<const Value>(&input, 1));
    } else {
      range->before(name);
    }
  }
  Py_INCREF(object);
  return object;
}

PyObject* exit(PyObject* object, PyObject* const*, Py_ssize_t) {
  end_range(reinterpret_cast<UserRange*>(object));
  Py_RETURN_NONE;
}

// @record_function("name") on a function: opscope.profiler._decorate(self, func).
PyObject* call(PyObject* object, PyObject* args, PyObject* kwargs) {
  PyObject* func = nullptr;
  if (!PyArg_ParseTuple(args, "O:record_function.__call__", &func) ||
      (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_TypeError, "record_function.__call__ takes one function");
    }
    return nullptr;
  }
  PyObject* module = PyImport_ImportModule("opscope.profiler");
  if (module == nullptr) return nullptr;
  PyObject* decorate = PyObject_GetAttrString(module, "_decorate");
  Py_DECREF(module);
  if (decorate == nullptr) return nullptr;
  PyObject* wrapped = PyObject_CallFunctionObjArgs(decorate, object, func, nullptr);
  Py_DECREF(decorate);
  return wrapped;
}

PyObject* get_name(PyObject* object, void*) {
  PyObject* name = reinterpret_cast<UserRange*>(object)->name;
  Py_INCREF(name);
  return name;
}

PyObject* get_args(PyObject* object, void*) {
  PyObject* args = reinterpret_cast<UserRange*>(object)->args;
  Py_INCREF(args);
  return args;
}

PyObject* repr(PyObject* object) {
  return PyUnicode_FromFormat("record_function(%R)", reinterpret_cast<UserRange*>(object)->name);
}

PyMethodDef g_methods[] = {
    {"__enter__", enter, METH_NOARGS, "Begins the range; returns the record_function."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(exit)),
     METH_FASTCALL, "Ends the range; exceptions propagate."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef g_getset[] = {
    {"name", get_name, nullptr, "The range's name.", nullptr},
    {"args", get_args, nullptr, "The range's args string, or None.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void bind_record_function(py::module_& m) {
  g_type.tp_name = "opscope.profiler.record_function";
  g_type.tp_basicsize = sizeof(UserRange);
  g_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_type.tp_doc =
      "record_function(name, args=None)\n--\n\n"
      "Context manager and decorator that records a named range (a USER_SCOPE range, shown\n"
      "as \"user_annotation\" in traces).\n\n"
      "name (str): the range's name, as shown in tables and traces.\n"
      "args (str, optional): recorded as the range's one input when the session records\n"
      "inputs (record_shapes=True): \"Concrete Inputs\" in the trace.\n\n"
      "    with record_function(\"load_batch\"):\n"
      "        batch = load()\n\n"
      "    @record_function(\"forward\")\n"
      "    def forward(x): ...\n\n"
      "An object is entered at most once at a time (ValueError otherwise); as a decorator,\n"
      "every call records its own range. With no session active, entering costs one check.";
  g_type.tp_new = tp_new;
  g_type.tp_vectorcall = vectorcall_new;
  g_type.tp_dealloc = dealloc;
  g_type.tp_call = call;
  g_type.tp_repr = repr;
  g_type.tp_methods = g_methods;
  g_type.tp_getset = g_getset;
  if (PyType_Ready(&g_type) < 0) throw py::error_already_set();
  Py_INCREF(&g_type);
  m.add_object("record_function", reinterpret_cast<PyObject*>(&g_type));
}

}  // namespace opscope::python

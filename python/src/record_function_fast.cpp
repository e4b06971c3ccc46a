// RecordFunctionFast: a range as a C-level context manager.
//
//   with opscope.profiler.RecordFunctionFast("data_loading"):
//       load()
//   with RecordFunctionFast("mm", [a, b], {"alpha": 1.0}):   # inputs: only with record_shapes
//       ...
//
// Why a PyTypeObject and not a pybind11 class: a `with` statement on it is two method calls
// and, for the common `with RecordFunctionFast("x"):`, one construction, all of which must
// cost little next to Python's own ~50 ns for an empty `with` on a trivial context manager.
// pybind11's dispatch (argument casters, overload resolution, holder allocation) costs a few
// hundred nanoseconds per call; here construction is a vectorcall with no argument tuple,
// __enter__ a METH_NOARGS and __exit__ a METH_FASTCALL method (bench/python_bench.py).
//
// With no session and no observer, __enter__ and __exit__ do one relaxed load of the record
// layer's state and a branch each (opscope/internal/collector.h): the name is not even read.
//
// Re-entry: one object may be entered again before it is exited (nested `with` on the same
// object, or the same object used by two threads, each holding the GIL in turn): every
// __enter__ begins a range of its own, and __exit__ ends the latest range the calling thread
// began on this object. The first range lives inside the object (no allocation); more are
// allocated.
//
// Not a GC type, as PyTorch's is not: the object refers only to what it was given (a name,
// an input list, a dict), so a cycle needs an input list that holds the object itself.
#include <Python.h>
#include <pythread.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "opscope/internal/collector.h"
#include "opscope/record_function.h"
#include "opscope/value.h"
#include "py_compat.h"

namespace opscope::python {
namespace {

// A range begun by one __enter__, and the thread that began it.
struct OpenRange {
  unsigned long thread;
  RecordFunction range{RecordScope::kFunction};
};

struct RecordFunctionFastObject {
  PyObject_HEAD
  PyObject* name;            // str, never null after construction
  PyObject* input_values;    // list or tuple, or null
  PyObject* keyword_values;  // dict, or null
  // The first open range, in place: constructed by __enter__, destroyed by __exit__.
  alignas(OpenRange) unsigned char first[sizeof(OpenRange)];
  bool first_open;
  std::vector<std::unique_ptr<OpenRange>>* more;  // ranges begun while `first` was open
};

OpenRange* first_range(RecordFunctionFastObject* self) {
  return std::launder(reinterpret_cast<OpenRange*>(self->first));
}

// The record layer's state: nonzero when a session records or an observer listens.
inline bool anyone_listens() {
  return internal::g_state.load(std::memory_order_relaxed) != 0;
}

// ---------------------------------------------------------------------------------------------
// Inputs. Converted only when a session records shapes (or an observer asks for inputs), into
// Values that point at `InputStorage`, which lives until before() has copied them.

struct InputStorage {
  std::vector<Value> values;
  // The sizes of shapes and the items of lists the Values point at. Moving the outer vectors
  // keeps the inner buffers where they are.
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<Value>> lists;
  // str objects whose UTF-8 text a Value points at (dtype names made by str()).
  std::vector<PyObject*> owned;

  InputStorage() = default;
  InputStorage(const InputStorage&) = delete;
  InputStorage& operator=(const InputStorage&) = delete;
  ~InputStorage() {
    for (PyObject* o : owned) Py_DECREF(o);
  }
};

// Reads a sequence of Python ints into `out`; false when an item is not an int.
bool ints_of(PyObject* seq, std::vector<std::int64_t>& out) {
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!PyLong_Check(items[i]) || PyBool_Check(items[i])) return false;
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0) return false;
    out.push_back(v);
  }
  return true;
}

// One Python object as a Value:
//   None, bool, int, float, str        -> the same kind
//   list/tuple of ints                 -> a tensor-like shape ([2, 3] in "Input Shapes"), as
//                                         sizes are what a profile reader wants from them
//   other list/tuple                   -> a list of the converted items (one level)
//   an object with .shape (a NumPy array, a torch.Tensor) -> tensor metadata: its shape and
//                                         str(dtype) when it has one
//   anything else                      -> None (PyTorch records what it cannot type as nothing)
// Never raises: a failed lookup is cleared and the item recorded as None.
Value to_value(PyObject* item, InputStorage& storage, bool nested) {
  if (item == Py_None) return Value();
  if (PyBool_Check(item)) return Value(item == Py_True);
  if (PyLong_Check(item)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow == 0) return Value(static_cast<std::int64_t>(v));
    return Value(PyLong_AsDouble(item));  // too big for 64 bits: its value as a double
  }
  if (PyFloat_Check(item)) return Value(PyFloat_AS_DOUBLE(item));
  if (PyUnicode_Check(item)) {
    Py_ssize_t size = 0;
    // The UTF-8 form is cached in the str object, which the caller keeps alive.
    if (const char* text = PyUnicode_AsUTF8AndSize(item, &size)) {
      return Value(std::string_view(text, static_cast<std::size_t>(size)));
    }
    PyErr_Clear();
    return Value();
  }
  if (PyList_Check(item) || PyTuple_Check(item)) {
    PyObject* seq = item;  // lists and tuples are their own "fast" sequences
    std::vector<std::int64_t>& sizes = storage.shapes.emplace_back();
    if (ints_of(seq, sizes)) return Value::tensor(std::span<const std::int64_t>(sizes), "");
    storage.shapes.pop_back();
    if (nested) return Value();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      items.push_back(to_value(PySequence_Fast_GET_ITEM(seq, i), storage, true));
    }
    std::vector<Value>& kept = storage.lists.emplace_back(std::move(items));
    return Value::list(std::span<const Value>(kept));
  }
  // Array-likes: only objects that have a `shape` attribute pay for the lookups.
  PyObject* shape = PyObject_GetAttrString(item, "shape");
  if (shape == nullptr) {
    PyErr_Clear();
    return Value();
  }
  Value result;
  PyObject* seq = PySequence_Fast(shape, "shape");
  Py_DECREF(shape);
  if (seq == nullptr) {
    PyErr_Clear();
    return result;
  }
  std::vector<std::int64_t>& sizes = storage.shapes.emplace_back();
  if (ints_of(seq, sizes)) {
    std::string_view dtype;
    if (PyObject* d = PyObject_GetAttrString(item, "dtype")) {
      if (PyObject* text = PyObject_Str(d)) {
        Py_ssize_t size = 0;
        if (const char* t = PyUnicode_AsUTF8AndSize(text, &size)) {
          dtype = std::string_view(t, static_cast<std::size_t>(size));
          storage.owned.push_back(text);  // the text lives until before() has copied it
        } else {
          Py_DECREF(text);
        }
      }
      Py_DECREF(d);
    }
    PyErr_Clear();  // no dtype, or str() failed: the shape alone
    result = Value::tensor(std::span<const std::int64_t>(sizes), dtype);
  } else {
    storage.shapes.pop_back();
  }
  Py_DECREF(seq);
  return result;
}


// The inputs of one range: input_values in order, then keyword_values' values in the dict's
// order (opscope's ranges have positional inputs only; the keys are not recorded).
void convert_inputs(RecordFunctionFastObject* self, InputStorage& storage) {
  if (self->input_values != nullptr) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(self->input_values);
    for (Py_ssize_t i = 0; i < n; ++i) {
      storage.values.push_back(
          to_value(PySequence_Fast_GET_ITEM(self->input_values, i), storage, false));
    }
  }
  if (self->keyword_values != nullptr) {
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    while (PyDict_Next(self->keyword_values, &pos, &key, &value)) {
      storage.values.push_back(to_value(value, storage, false));
    }
  }
}

// Names the range and begins it (two-phase RecordFunction: the inputs are converted only when
// someone records them).
void begin(RecordFunctionFastObject* self, RecordFunction& range) {
  Py_ssize_t size = 0;
  // Cached in the str object by the first call: later calls return the pointer.
  const char* text = PyUnicode_AsUTF8AndSize(self->name, &size);
  if (text == nullptr) {
    PyErr_Clear();  // a str that cannot be encoded (lone surrogates): an unnamed range
    text = "";
    size = 0;
  }
  const std::string_view name(text, static_cast<std::size_t>(size));
  if ((self->input_values != nullptr || self->keyword_values != nullptr) &&
      range.wants_inputs()) [[unlikely]] {
    InputStorage storage;
    try {
      convert_inputs(self, storage);
    } catch (const std::bad_alloc&) {
      // Out of memory while converting: the range without its inputs, rather than an
      // exception through the interpreter.
      range.before(name);
      return;
    }
    range.before(name, std::span<const Value>(storage.values));
    return;
  }
  range.before(name);
}

PyObject* rff_enter(PyObject* op, PyObject* /*unused*/) {
  if (!anyone_listens()) [[likely]] {
    Py_RETURN_NONE;
  }
  auto* self = reinterpret_cast<RecordFunctionFastObject*>(op);
  const unsigned long thread = PyThread_get_thread_ident();
  if (!self->first_open) {
    OpenRange* r = new (self->first) OpenRange{thread};
    self->first_open = true;
    begin(self, r->range);
    Py_RETURN_NONE;
  }
  try {
    if (self->more == nullptr) self->more = new std::vector<std::unique_ptr<OpenRange>>;
    self->more->push_back(std::make_unique<OpenRange>(thread));
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  begin(self, self->more->back()->range);
  Py_RETURN_NONE;
}

// Ends the latest range the calling thread began on `self`; nothing when there is none (the
// object was entered while nobody listened).
void end_latest(RecordFunctionFastObject* self) {
  const unsigned long thread = PyThread_get_thread_ident();
  if (self->more != nullptr) {
    for (auto it = self->more->end(); it != self->more->begin();) {
      --it;
      if ((*it)->thread == thread) {
        self->more->erase(it);  // ~OpenRange ends the range
        if (self->more->empty()) {
          delete self->more;  // back to the one-flag test in __exit__
          self->more = nullptr;
        }
        return;
      }
    }
  }
  if (self->first_open) {
    // Another thread's range when this thread has none open here: ranges may end on any
    // thread, and leaving it open would keep it open until the object dies.
    first_range(self)->~OpenRange();
    self->first_open = false;
  }
}

PyObject* rff_exit(PyObject* op, PyObject* const* /*args*/, Py_ssize_t /*nargs*/) {
  auto* self = reinterpret_cast<RecordFunctionFastObject*>(op);
  // Nothing open (nobody listened at __enter__): one test of the object's own flag. A range
  // begun while a session recorded ends here even when the session has stopped since.
  if (!self->first_open && self->more == nullptr) [[likely]] {
    Py_RETURN_NONE;
  }
  end_latest(self);
  Py_RETURN_NONE;
}

// Checks and stores the arguments; on failure sets the exception (the seed's messages) and
// returns -1. Takes new references.
int set_arguments(RecordFunctionFastObject* self, PyObject* name, PyObject* input_values,
                  PyObject* keyword_values) {
  if (name == nullptr || !PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_RuntimeError, "The name passed to RecordFunctionFast must be a string");
    return -1;
  }
  if (input_values == Py_None) input_values = nullptr;
  if (keyword_values == Py_None) keyword_values = nullptr;
  if (input_values != nullptr && !PyList_Check(input_values) && !PyTuple_Check(input_values)) {
    PyErr_SetString(PyExc_RuntimeError, "input_values must be a list or tuple");
    return -1;
  }
  if (keyword_values != nullptr && !PyDict_Check(keyword_values)) {
    PyErr_SetString(PyExc_RuntimeError, "keyword_values must be dict");
    return -1;
  }
  Py_XSETREF(self->name, Py_NewRef(name));
  Py_XSETREF(self->input_values, Py_XNewRef(input_values));
  Py_XSETREF(self->keyword_values, Py_XNewRef(keyword_values));
  return 0;
}

PyObject* rff_new(PyTypeObject* type, PyObject* /*args*/, PyObject* /*kwargs*/) {
  // tp_alloc zeroes the object: no name, no inputs, no open range.
  return type->tp_alloc(type, 0);
}

int rff_init(PyObject* op, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"name", "input_values", "keyword_values", nullptr};
  PyObject* name = nullptr;
  PyObject* input_values = nullptr;
  PyObject* keyword_values = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:RecordFunctionFast",
                                   const_cast<char**>(keywords), &name, &input_values,
                                   &keyword_values)) {
    return -1;
  }
  return set_arguments(reinterpret_cast<RecordFunctionFastObject*>(op), name, input_values,
                       keyword_values);
}

void rff_dealloc(PyObject* op) {
  auto* self = reinterpret_cast<RecordFunctionFastObject*>(op);
  // Ranges still open (an object dropped inside its `with`, say by a generator that was never
  // finished) end now rather than never.
  delete self->more;
  if (self->first_open) first_range(self)->~OpenRange();
  Py_CLEAR(self->name);
  Py_CLEAR(self->input_values);
  Py_CLEAR(self->keyword_values);
  Py_TYPE(op)->tp_free(op);
}

PyObject* rff_repr(PyObject* op) {
  auto* self = reinterpret_cast<RecordFunctionFastObject*>(op);
  return PyUnicode_FromFormat("RecordFunctionFast(%R)", self->name ? self->name : Py_None);
}

PyTypeObject g_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// `RecordFunctionFast(...)` without building an argument tuple or going through tp_new and
// tp_init: the per-use construction is most of what a `with RecordFunctionFast("x"):` costs.
PyObject* rff_vectorcall(PyObject* type, PyObject* const* args, std::size_t nargsf,
                         PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* values[3] = {nullptr, nullptr, nullptr};
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError,
                 "RecordFunctionFast() takes at most 3 arguments (%zd given)", nargs);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) values[i] = args[i];
  if (kwnames != nullptr) {
    static const char* const kNames[] = {"name", "input_values", "keyword_values"};
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int slot = -1;
      for (int j = 0; j < 3; ++j) {
        if (PyUnicode_CompareWithASCIIString(key, kNames[j]) == 0) slot = j;
      }
      if (slot < 0) {
        PyErr_Format(PyExc_TypeError,
                     "RecordFunctionFast() got an unexpected keyword argument '%U'", key);
        return nullptr;
      }
      if (values[slot] != nullptr) {
        PyErr_Format(PyExc_TypeError,
                     "RecordFunctionFast() got multiple values for argument '%U'", key);
        return nullptr;
      }
      values[slot] = args[nargs + k];
    }
  }
  if (values[0] == nullptr) {
    PyErr_SetString(PyExc_TypeError,
                    "RecordFunctionFast() missing required argument 'name' (pos 1)");
    return nullptr;
  }
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  PyObject* op = t->tp_alloc(t, 0);
  if (op == nullptr) return nullptr;
  if (set_arguments(reinterpret_cast<RecordFunctionFastObject*>(op), values[0], values[1],
                    values[2]) != 0) {
    Py_DECREF(op);
    return nullptr;
  }
  return op;
}

PyMethodDef g_methods[] = {
    {"__enter__", rff_enter, METH_NOARGS, "Begins a range (when a session records)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(rff_exit)),
     METH_FASTCALL, "Ends the latest range this thread began on this object."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void bind_record_function_fast(pybind11::module_& m) {
  g_type.tp_name = "opscope._C.RecordFunctionFast";
  g_type.tp_basicsize = sizeof(RecordFunctionFastObject);
  g_type.tp_dealloc = rff_dealloc;
  g_type.tp_repr = rff_repr;
  // Not a base type: the vectorcall constructor builds exactly this type.
  g_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_type.tp_doc = PyDoc_STR(
      "RecordFunctionFast(name, input_values=None, keyword_values=None)\n--\n\n"
      "A context manager that records a range named `name` while a profiler session is\n"
      "active, at a fraction of record_function's cost. `input_values` (a list or tuple) and\n"
      "the values of `keyword_values` (a dict) are recorded as the range's inputs when the\n"
      "session has record_shapes. With no session, entering and exiting costs one check.");
  g_type.tp_methods = g_methods;
  g_type.tp_new = rff_new;
  g_type.tp_init = rff_init;
  g_type.tp_vectorcall = rff_vectorcall;
  if (PyType_Ready(&g_type) < 0) throw pybind11::error_already_set();
  Py_INCREF(&g_type);
  m.add_object("RecordFunctionFast", reinterpret_cast<PyObject*>(&g_type));
}

}  // namespace opscope::python
